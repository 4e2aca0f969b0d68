"""Statistics: the one place each estimator is computed (means, percentiles, bootstrap
intervals, Cohen's kappa), over plain sequences. Imports nothing from the rest of the package
but ``errors``; numerical libraries are imported lazily, inside the functions that need them."""
