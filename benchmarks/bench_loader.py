"""Loader time for a 10,000-case suite, written inline in YAML and as a JSONL cases file
(issue 9: "well under a second of loader time"). CPU seconds, best of ``--repeat``. Numbers
for people, never a threshold.

    python benchmarks/bench_loader.py [--cases 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from pytest_evalmine.suite.loader import load_suite

HEAD = (
    "version: 1\nsuite: s\nmodels: [fake/a]\ntasks:\n- id: t\n  kind: answer\n"
    "  prompt: 'Answer {{ q }} ({{ n }})'\n"
)


def write_suites(folder: Path, cases: int) -> dict[str, Path]:
    lines = (
        json.dumps({"id": f"c{i}", "vars": {"q": f"question {i}", "n": i}}) for i in range(cases)
    )
    (folder / "cases.jsonl").write_text("".join(line + "\n" for line in lines))
    (folder / "jsonl.eval.yaml").write_text(HEAD + "  cases_path: cases.jsonl\n")
    inline = "".join(
        f"  - {{id: c{i}, vars: {{q: 'question {i}', n: {i}}}}}\n" for i in range(cases)
    )
    (folder / "inline.eval.yaml").write_text(HEAD + "  cases:\n" + inline)
    return {
        "inline YAML": folder / "inline.eval.yaml",
        "JSONL cases file": folder / "jsonl.eval.yaml",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for form, path in write_suites(Path(folder), args.cases).items():
            load_suite(path)  # imports and the compiled schema validator, once
            times = []
            for _ in range(args.repeat):
                start = time.process_time()
                load_suite(path)
                times.append(time.process_time() - start)
            print(f"{args.cases} cases, {form}: {min(times):.3f} s CPU (best of {args.repeat})")


if __name__ == "__main__":
    main()
