"""The LLM judge: candidate/baseline pairs, judge requests in both orders, calibration of the
judge against the user's labels, win rates and the headline gate. Win rates live here rather
than in ``stats`` because they are defined over judged pairs and gated by calibration; the
estimators they use come from ``stats``. May import ``stats``, ``scoring``, ``run``,
``adapters``, ``suite`` and ``errors``."""
