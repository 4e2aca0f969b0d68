"""What people and programs read after a run: the run summary, the scorecard, report files
(answers.jsonl, report.json, report.md, latest.json), comparison with an earlier run, the
terminal text and the pytest-html fragments. May import every core package below it
(``judging``, ``stats``, ``scoring``, ``run``, ``suite``); never ``engine`` or the pytest glue."""
