"""The example suite against a real small language model served by a real llama.cpp server on
loopback: real tokens through the real OpenAI-compatible protocol, schema-constrained output
included. The answers are poor; the point is the plumbing, end to end."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from .local_model import LlamaServer, llama_server  # noqa: F401

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SELECTION = "evalmine(task='ticket-triage') or evalmine(task='polite-rewrite')"
# One prose case is enough to see free text flow; the others only cost CPU time.
DESELECT = [
    f"examples/support-desk.eval.yaml::polite-rewrite::{case}[{model}]"
    for case in ("label-printer-offline", "feature-not-planned")
    for model in ("local/smollm2", "fake/candidate")
]


def run_suite(pytester: pytest.Pytester, server: LlamaServer, judge: str) -> dict:
    shutil.copytree(EXAMPLES, pytester.path / "examples", dirs_exist_ok=True)
    result = pytester.runpytest_subprocess(
        "examples/support-desk.eval.yaml",
        "--evalmine-models=local/smollm2,fake/candidate",
        # The server runs one slot (-np 1): more concurrent requests would only queue there.
        f"--evalmine-endpoint=local={server.base_url},free,concurrency=1",
        f"--evalmine-judge={judge}",
        "-m",
        SELECTION,
        *(f"--deselect={node}" for node in DESELECT),
        "-p",
        "no:cacheprovider",
    )
    # Poor answers may fail their checks (exit 1); anything else is a broken run.
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    assert "Traceback" not in result.stdout.str()
    # A selected subset never moves latest.json: the run is the folder the summary names.
    match = re.search(r"report:\s+reports/support-desk/([^/\s]+)/", result.stdout.str())
    assert match, result.stdout.str()[-3000:]
    run_dir = pytester.path / "reports" / "support-desk" / match.group(1)
    assert (run_dir / "report.md").is_file()
    report = json.loads((run_dir / "report.json").read_text())
    report["_answers"] = [
        json.loads(line) for line in (run_dir / "answers.jsonl").read_text().splitlines()
    ]
    report["_pairs"] = [
        json.loads(line) for line in (run_dir / "pairs.jsonl").read_text().splitlines()
    ]
    return report


def test_example_suite_with_a_real_local_model_answering_and_judging(
    pytester: pytest.Pytester,
    llama_server: LlamaServer,  # noqa: F811
) -> None:
    report = run_suite(pytester, llama_server, judge="fake/judge")
    local = [a for a in report["_answers"] if a["model"] == "local/smollm2"]
    assert len(local) == 5
    assert all(a["outcome"] != "error" for a in local), [a["error"] for a in local]
    assert all(a["text"] for a in local)
    assert all(a["usage_reported"] and a["tokens"]["input_tokens"] > 0 for a in local)
    assert all(a["cost_usd"] == 0 for a in local), "the endpoint is declared free"
    triage = [a for a in local if a["task"] == "ticket-triage"]
    assert {a["schema_mode"] for a in triage} == {"native"}
    assert any(a["parsed"] is not None for a in triage), "schema-constrained JSON came back"
    scorecard = {row["model"]: row for row in report["scorecard"]}
    assert scorecard["local/smollm2"]["cost_usd"] == 0
    assert report["headline"]["judge"]["model"] == "fake/judge"
    assert report["headline"]["pairs"]["total"] == 5
    assert report["headline"]["judge_calls"]["made"] > 0

    # The same project again, the local model now judging: answers come from the cache.
    report = run_suite(pytester, llama_server, judge="local/smollm2")
    assert report["calls"] == {"made": 0, "cached": 10}
    headline = report["headline"]
    assert headline["judge"]["model"] == "local/smollm2"
    judged_passes = [p for pair in report["_pairs"] for p in pair["passes"]]
    assert judged_passes, "the local judge was asked"
    assert any(p["winner_slot"] in ("1", "2", "tie") for p in judged_passes)
    assert headline["judge_cost"]["spent_usd"] == 0
    assert headline["calibration"]["status"] == "no_labels"  # labels name other models
    assert headline["headline_eligible"] is False
