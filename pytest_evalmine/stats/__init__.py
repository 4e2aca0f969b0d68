"""Statistics: the one place each estimator is computed, over plain sequences, one job per
module: ``estimators`` (closed forms: means, percentiles, Cohen's kappa, seeds),
``proportions`` (rates with Wilson intervals), ``resample`` (seeded numpy intervals: the
Bayesian bootstrap of a mean, kappa's posterior interval), ``paired`` (paired deltas, exact
McNemar). Imports nothing from the rest of the package but ``errors``; numpy is imported
lazily, inside the functions that need it; scipy not at all (tests use it as the independent
implementation)."""
