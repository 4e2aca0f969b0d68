"""Deterministic scoring of one answer: did it arrive, parse and fit its schema (and, as the
scoring issues land, checkers and the execution sandbox). May import ``suite``, ``run``
records and ``errors``; never ``judging`` or ``reports``."""
