"""API keys come from the environment only and never reach the cache, reports or output."""

from __future__ import annotations

import asyncio
import json
import secrets
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evalmine.adapters.base import AdapterError, Request
from pytest_evalmine.adapters.http import api_key_from_env
from pytest_evalmine.adapters.openai import OpenAIAdapter
from pytest_evalmine.redaction import (
    KEY_PATTERNS,
    KEY_PREFIXES,
    count_redacted,
    redact,
    remember_key,
)
from pytest_evalmine.reports.files import _chunks, atomic_write

from .conftest import SMALL_SUITE, latest_answers, latest_report
from .http_server import LoopbackServer, Received, Reply, running_server

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
    # Refusal goes by the real key format (random base64url mixing digits and both cases),
    # which the redaction-only values above do not need to follow.
    key = "sk-" + "proj-" + "Ev4lM1neTest" * 4
    small_suite.write_text(small_suite.read_text().replace("I was charged twice", key))
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (
        "$.tasks[0].cases[0].vars.message: looks like an API key (OpenAI format)"
        in result.stdout.str()
    )
    assert key not in result.stdout.str()


# --- errors: redact first, clip after; every loaded key, whatever its shape ----------------


def unshaped_token() -> str:
    """A token no key pattern matches: only the loaded value can hide it."""
    return "tok" + secrets.token_hex(20)


def leaked_pieces(token: str, text: str, width: int = 8) -> list[str]:
    """Every run of ``width`` characters of ``token`` found in ``text``."""
    return [
        token[i : i + width] for i in range(len(token) - width + 1) if token[i : i + width] in text
    ]


def local_failure(server: LoopbackServer) -> AdapterError:
    adapter = OpenAIAdapter(name="local", base_url=server.url + "/v1", api_key_env="LOCAL_TOKEN")

    async def once() -> None:
        try:
            await adapter.complete(Request(model="local/m", prompt="Hi"))
        finally:
            await adapter.aclose()

    with pytest.raises(AdapterError) as info:
        asyncio.run(once())
    return info.value


@pytest.mark.parametrize(
    ("status", "prefix_chars"),
    [(400, 470), (502, 480), (200, 180)],
    ids=["4xx-message-clip", "5xx-message-clip", "non-json-200-body-clip"],
)
def test_an_unshaped_token_straddling_the_clip_is_redacted_whole(
    monkeypatch: pytest.MonkeyPatch, status: int, prefix_chars: int
) -> None:
    """Before: the message was clipped first, so 20 to 37 characters of the token survived."""
    token = unshaped_token()
    monkeypatch.setenv("LOCAL_TOKEN", token)
    message = "x" * prefix_chars + f" echo: {token} " + "y" * 600
    body = (
        json.dumps({"error": {"message": message}}).encode() if status != 200 else message.encode()
    )
    with running_server() as server:
        server.add(Reply(status, body))
        error = local_failure(server)
    assert leaked_pieces(token, str(error)) == []


def test_a_key_loaded_for_one_provider_is_redacted_from_another_providers_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: each adapter redacted only its own key, so another loaded key echoed back by a
    gateway stayed in the message."""
    other = unshaped_token()
    monkeypatch.setenv("OTHER_PROVIDER_TOKEN", other)
    monkeypatch.setenv("LOCAL_TOKEN", unshaped_token())
    api_key_from_env("OTHER_PROVIDER_TOKEN", "other")
    with running_server() as server:
        server.add(Reply.json(401, {"error": {"message": f"forwarded {other} upstream"}}))
        error = local_failure(server)
    assert other not in str(error)
    assert "forwarded [redacted] upstream" in str(error)


def test_redact_prefers_the_longer_value_and_the_count_reads_the_text() -> None:
    inner = unshaped_token()
    outer = inner + "-suffix"
    text = redact(f"a {outer} b {inner} c {FAKE_KEYS['OPENAI_API_KEY']}", [inner, outer])
    assert text == "a [redacted] b [redacted] c [redacted]"
    assert count_redacted(text, None, "") == 3
    # Values too short to be a key are left alone: they would mangle ordinary answers.
    assert redact("a short abc", ["abc"]) == "a short abc"


def test_every_key_shape_starts_with_a_prefix_the_shortcut_looks_for() -> None:
    # redact() skips the expressions for a text holding no prefix: each shape must have one.
    for provider, pattern in KEY_PATTERNS:
        literal = pattern.pattern.removeprefix(r"\b")
        assert literal.startswith(KEY_PREFIXES), provider
    shaped = {
        "Anthropic": "sk-ant-" + "a1" * 10,
        "OpenAI": "sk-proj-" + "b2" * 12,
        "Google": "AIza" + "c3" * 18,
    }
    for provider, pattern in KEY_PATTERNS:
        assert pattern.fullmatch(shaped[provider]), provider
        text = redact("answer " * 1000 + shaped[provider] + " end")
        assert text.endswith("answer [redacted] end"), provider
    plain = "answer " * 1000
    assert redact(plain) is plain


# --- the whole run: no file it writes holds a key, answers and errors alike ---------------


def echoing_server_reply(received: Received) -> Reply:
    """A server that sends back the credential it was given: in its model listing (which
    the cache keeps for replays), in a 400 error body (past the clip) for one case, inside
    the answer for the others."""
    sent = received.headers["authorization"]
    token = sent.removeprefix("Bearer ")
    if received.method == "GET":
        listing = [{"id": "served-model", "meta": {"owner": f"the holder of {token}"}}]
        return Reply.json(200, {"object": "list", "data": listing})
    prompt = received.body["messages"][-1]["content"]
    if "charged twice" in prompt:
        # The key starts before character 500 and ends after it: the old clip kept 33 of its
        # characters; redacted first, its marker now sits whole inside the clip.
        message = "x" * 450 + f" you sent {sent} " + "y" * 600
        return Reply.json(400, {"error": {"message": message}})
    return chat_reply(f"Sure. For the record your key is {token}, thanks.", output_tokens=12)


@pytest.mark.parametrize("workers", [0, 2], ids=["one-process", "xdist"])
def test_no_file_a_run_writes_holds_an_echoed_key_shaped_or_not(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Before: the answer text went whole into cache.sqlite, answers.jsonl, junit.xml and the
    pytest-html page, and 33 characters of the error echo survived the clip."""
    shaped = "sk-" + "proj-" + secrets.token_hex(24)
    unshaped = unshaped_token()
    monkeypatch.setenv("GW_KEY", shaped)
    monkeypatch.setenv("LOCAL_TOKEN", unshaped)
    pytester.makefile(
        ".eval.yaml",
        small=SMALL_SUITE.replace("models: [fake/alpha, fake/beta]", "models: [local/a, gw/b]"),
    )
    with running_server() as server:
        # Every process that prepares the endpoints lists their models once.
        server.add(*(Reply(respond=echoing_server_reply) for _ in range(6 + 2 * (1 + workers))))
        args = [
            f"--evalmine-endpoint=local={server.url}/v1,free,key_env=LOCAL_TOKEN",
            f"--evalmine-endpoint=gw={server.url}/v1,free,key_env=GW_KEY",
            "--evalmine-retries=0",
            "--junitxml=junit.xml",
            "--html=report.html",
            "--self-contained-html",
        ]
        if workers:
            # Each worker loads the keys and redacts what it receives; the controller only
            # writes what the workers' records carry.
            result = pytester.runpytest_subprocess("-n", str(workers), *args)
        else:
            result = pytester.runpytest(*args)
        sent = {r.headers["authorization"] for r in server.requests if r.method == "POST"}
    assert sent == {f"Bearer {shaped}", f"Bearer {unshaped}"}  # the keys did travel
    result.assert_outcomes(passed=2, failed=2, errors=2)  # login-loop: prose is no JSON
    files = sorted(p for p in pytester.path.rglob("*") if p.is_file())
    names = {p.name for p in files}
    assert {"cache.sqlite", "answers.jsonl", "report.md", "junit.xml", "report.html"} <= names
    texts = {"terminal": result.stdout.str() + result.stderr.str()}
    texts.update({str(p): p.read_bytes().decode("latin-1") for p in files})
    for where, text in texts.items():
        for token in (shaped, unshaped):
            # Runs of 12 characters: long enough that random text never matches by chance.
            assert leaked_pieces(token, text, width=12) == [], f"{token[:4]}... in {where}"
    report = latest_report(pytester.path, "small")
    assert report["redactions"] == 6
    records = latest_answers(pytester.path, "small")
    assert [r["redactions"] for r in records] == [1] * 6
    assert all("[redacted]" in r["text"] for r in records if r["error"] is None)
    run_dir = pytester.path / "reports" / "small" / report["run_id"]
    assert "6 API key(s) redacted" in (run_dir / "report.md").read_text()
    # The cache keys were built from the redacted listing the cache keeps: a replay finds
    # every answer without the server (the two errors were never cached: replay misses).
    replay = pytester.runpytest_subprocess(*args, "--evalmine-record=none")
    replay.assert_outcomes(passed=2, failed=4)
    assert latest_report(pytester.path, "small")["calls"] == {"made": 0, "cached": 4}


# --- issue 20: pieces of a key, and the pytest-html page -----------------------------------


def test_every_run_of_twelve_characters_of_a_loaded_key_is_redacted() -> None:
    """Before: only the whole value was replaced, so a server that echoed a key's first and
    last 20 characters separately kept 40 of its characters in every file."""
    # 43 distinct characters, so where one run of it ends in a text is never a coincidence.
    token = string.ascii_letters[:26] + string.digits + "ABCDEFG"
    remember_key(token)
    text = redact(f"head {token[:20]} tail {token[-20:]} mid {token[7:19]} short {token[7:18]}")
    assert text == f"head [redacted] tail [redacted] mid [redacted] short {token[7:18]}"
    assert count_redacted(text) == 3
    # Two runs side by side are two runs; a run inside a longer one is that one.
    assert redact(f"<{token[:30]}{token[25:]}>") == "<[redacted][redacted]>"
    assert redact(f"<{token[3:30]}|{token[10:40]}>") == "<[redacted]|[redacted]>"
    assert redact(f"<{token[2:41]}>", [token[5:30]]) == "<[redacted]>"
    # A value of ``extra`` gets the same treatment; one too short for pieces stays whole.
    other = "x" + secrets.token_hex(15)
    assert redact(f"a {other[2:16]} b", [other]) == "a [redacted] b"
    assert redact("a 0123456789 b", ["0123456789"]) == "a [redacted] b"
    assert redact("a 012345678 b", ["0123456789"]) == "a 012345678 b"


def test_pieces_are_found_in_any_text_whatever_the_characters() -> None:
    """Non-ASCII values and texts, a value whose blocks repeat, a piece at either end."""
    value = "ключ-" + "ab" * 10 + "-секрет-значение"
    for piece in (value[:12], value[-12:], value[3:20], value[10:30]):
        for text in (piece, f"é{piece}é", f"  {piece}", f"{piece}\n"):
            assert leaked_pieces(value, redact(text, [value]), width=12) == [], (piece, text)
    # Among many long words (code): the text is looked at whole, and only the run goes.
    code = "get_user_by_identifier(lookup_table_name)\n" * 20
    assert redact(code + value[4:20] + "\n" + code, [value]) == f"{code}[redacted]\n{code}"
    assert redact(code, [value]) == code
    assert redact("ab" * 5 + "a", [value]) == "ab" * 5 + "a"  # 11 characters of it: kept
    assert redact("x" + "ab" * 6 + "y", [value]) == "x[redacted]y"


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(
    value=st.text(alphabet="ab-é\u20acXY", min_size=8, max_size=40),
    parts=st.lists(
        st.tuples(st.integers(0, 40), st.integers(0, 40), st.text("ab \u20acz", max_size=5)),
        max_size=6,
    ),
)
def test_no_run_of_twelve_characters_survives_and_nothing_else_is_touched(
    value: str, parts: list[tuple[int, int, str]]
) -> None:
    """Pieces of a value (from a small alphabet, so they repeat and overlap) glued between
    filler: what comes out holds no run of 12 characters of the value, and a text holding
    none (and not the value itself) comes out unchanged."""
    text = "".join(value[a:b] + filler for a, b, filler in parts)
    out = redact(text, [value])
    assert leaked_pieces(value, out, width=12) == []
    if len(value) < 12:
        assert value not in out
    if not leaked_pieces(value, text, width=12) and value not in text:
        assert out == text


PIECES_SUITE = SMALL_SUITE.replace(
    "models: [fake/alpha, fake/beta]", "models: [local/a, local/b]"
).replace("version: 1\n", "version: 1\njudge: {model: local/judge}\n")


def test_pieces_of_an_echoed_key_reach_no_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a server echoing the key's first and last 20 characters, separately, left
    them in the cache, answers.jsonl, pairs.jsonl, report.md, report.html, the pytest-html
    page and the recording."""
    token = unshaped_token()
    monkeypatch.setenv("LOCAL_TOKEN", token)
    pytester.makefile(".eval.yaml", small=PIECES_SUITE)

    def echo_pieces(received: Received) -> Reply:
        pieces = f"{token[:20]} and then {token[-20:]}"
        if received.method == "GET":
            listing = [{"id": "served", "meta": {"owner": pieces}}]
            return Reply.json(200, {"object": "list", "data": listing})
        return Reply.json(
            200,
            {
                "id": f"req-{token[:20]}",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"I saw {pieces}."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 12},
            },
        )

    with running_server() as server:
        server.respond = echo_pieces
        pytester.runpytest(
            f"--evalmine-endpoint=local={server.url}/v1,free,key_env=LOCAL_TOKEN",
            "--evalmine-retries=0",
            "--evalmine-recording=beside",
            "--html=report.html",
            "--self-contained-html",
        )
    files = sorted(p for p in pytester.path.rglob("*") if p.is_file())
    names = {p.name for p in files}
    wanted = {"cache.sqlite", "answers.jsonl", "pairs.jsonl", "report.md", "report.html"}
    assert wanted <= names, names
    assert any(".recording" in name or name.endswith(".jsonl") for name in names)
    leaks = {
        str(p.relative_to(pytester.path)): pieces
        for p in files
        if (pieces := leaked_pieces(token, p.read_bytes().decode("latin-1"), width=12))
    }
    assert leaks == {}
    report = latest_report(pytester.path, "small")
    assert report["redactions"] >= 6  # two pieces in each of the six answers, at least


def test_a_loaded_key_inside_a_prompt_never_reaches_the_pytest_html_page(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the rendered prompt went to pytest-html as it was, so a key in a case's
    variable (``token=$KEY``) was on the page 5 times, and a failed check's expected value
    holding it was in the page's log; evalmine's own files held it 0 times."""
    token = unshaped_token()
    monkeypatch.setenv("LOCAL_TOKEN", token)
    suite = SMALL_SUITE.replace("models: [fake/alpha, fake/beta]", "models: [local/a]")
    suite = suite.replace("I was charged twice", f"token={token}")
    suite += (
        "  - id: echo\n    kind: rewrite\n    prompt: Say hello\n    checks: [exact]\n"
        f'    cases:\n      - {{id: k, gold: "token={token}"}}\n'
    )
    pytester.makefile(".eval.yaml", small=suite)
    with running_server() as server:
        server.respond = lambda received: (
            Reply.json(200, {"object": "list", "data": [{"id": "served"}]})
            if received.method == "GET"
            else chat_reply('{"category": "billing"}')
        )
        result = pytester.runpytest(
            f"--evalmine-endpoint=local={server.url}/v1,free,key_env=LOCAL_TOKEN",
            "--html=report.html",
            "--self-contained-html",
        )
        prompts = [r.body["messages"][-1]["content"] for r in server.requests if r.body]
    assert any(token in prompt for prompt in prompts)  # the key did travel in the prompt
    result.assert_outcomes(passed=3, failed=1)
    page = (pytester.path / "report.html").read_text()
    assert "evalmine-answer" in page  # the items' extras are on the page
    assert page.count(token) == 0
    assert leaked_pieces(token, page, width=12) == []
    assert "token=[redacted]" in page
    for path in (pytester.path / "reports").rglob("*"):
        if path.is_file():
            assert token not in path.read_text("latin-1"), path


def chat_reply(content: str, output_tokens: int = 6) -> Reply:
    return Reply.json(
        200,
        {
            "id": "chatcmpl-1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": output_tokens},
        },
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["x", " ", "-", "_", '"', "\n", "é", "", "sk-", "A" * 20])))
def test_written_chunks_join_pieces_only_after_a_character_that_is_no_word_character(
    pieces: list[str],
) -> None:
    # atomic_write redacts chunks of pieces: a seam after a word character would hide a key
    # shape's \b ("abc" + "sk-..."), so no chunk joins pieces there.
    chunks = list(_chunks(pieces))
    assert "".join(chunks) == "".join(pieces)
    remaining = [p for p in pieces if p]
    for chunk in chunks:
        joined = ""
        while joined != chunk:
            assert not (joined[-1:].isalnum() or joined[-1:] == "_")
            joined += remaining.pop(0)
    assert not remaining


def test_a_key_shape_after_a_word_character_is_redacted_in_a_written_file(tmp_path: Path) -> None:
    key = "sk-" + "proj-" + "evalminetest" * 4
    path = tmp_path / "out.txt"
    atomic_write(path, iter(["line one\n", "abc", key, " and more\n", "x" * 70_000, key]))
    text = path.read_text()
    assert key not in text and "abc[redacted] and more\n" in text
    assert text.endswith("x" * 70_000 + "[redacted]")
    # Split after a "-" (a seam chunks join), the key is found across the seam.
    atomic_write(path, iter(["key: ", key[:8], key[8:], "\n"]))
    assert path.read_text() == "key: [redacted]\n"
