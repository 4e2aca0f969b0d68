"""API keys come from the environment only and never reach the cache, reports or output."""

from __future__ import annotations

from pathlib import Path

import pytest

# Built at run time so no key-shaped literal sits in the repository.
FAKE_KEYS = {
    "ANTHROPIC_API_KEY": "sk-" + "ant-" + "evalminetest" * 4,
    "OPENAI_API_KEY": "sk-" + "proj-" + "evalminetest" * 4,
    "GEMINI_API_KEY": "AI" + "za" + "evalminetest" * 4,
}


def test_keys_in_the_environment_never_reach_disk_or_output(
    pytester: pytest.Pytester, small_suite: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in FAKE_KEYS.items():
        monkeypatch.setenv(name, value)
    result = pytester.runpytest(
        "--evalmine-fake", "--evalmine-fake-fault=server_error,prompt=politely,count=99"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # error outcomes are reported, not hidden
    files = [p for p in pytester.path.rglob("*") if p.is_file()]
    assert any(p.name == "cache.sqlite" for p in files)
    assert any(p.name == "report.json" for p in files)
    output = result.stdout.str() + result.stderr.str()
    for value in FAKE_KEYS.values():
        assert value not in output
        for path in files:
            assert value.encode() not in path.read_bytes(), f"{value[:6]}... leaked into {path}"


def test_a_suite_holding_a_key_is_refused(pytester: pytest.Pytester, small_suite: Path) -> None:
    key = FAKE_KEYS["OPENAI_API_KEY"]
    small_suite.write_text(small_suite.read_text().replace("I was charged twice", key))
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (
        "$.tasks[0].cases[0].vars.message: looks like an API key (OpenAI format)"
        in result.stdout.str()
    )
    assert key not in result.stdout.str()
