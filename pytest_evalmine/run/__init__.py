"""Running calls: the dispatcher (the one place that spends money), the SQLite store (answer
cache, spend ledger, call claims), the price table, endpoints, run tokens, answer records and
the ``EvalClient`` used from plain tests. May import ``adapters``, ``suite``, ``errors`` and
``options``; never ``scoring``, ``judging``, ``reports`` or ``engine``."""
