"""The built-in providers' base-URL variables (spec: "Providers and endpoints"): the ones their
official SDKs read, so a company gateway needs no conftest hook; the server enters the cache
key as an endpoint's does. Over real HTTP on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_evalmine.adapters.anthropic import AnthropicAdapter
from pytest_evalmine.adapters.base import Request, cache_key
from pytest_evalmine.adapters.builtin import default_registry
from pytest_evalmine.adapters.gemini import GeminiAdapter
from pytest_evalmine.adapters.openai import OpenAIAdapter
from pytest_evalmine.commands.cli import main
from pytest_evalmine.errors import EvalmineError
from pytest_evalmine.run.endpoints import base_urls_from

from .batch_servers import ProviderServer
from .conftest import clear_proxies, latest_report

SUITE = """\
version: 1
suite: gateway
models: [openai/gpt-5-mini, anthropic/claude-haiku-4-5, google/gemini-2.5-flash]
defaults: {max_tokens: 64}
tasks:
  - id: echo
    kind: rewrite
    prompt: "Rewrite: {{ text }}"
    cases:
      - {id: one, vars: {text: "hello"}}
"""
KEYS = {
    "OPENAI_API_KEY": "sk-" + "proj-" + "gatewaytest" * 4,
    "ANTHROPIC_API_KEY": "sk-" + "ant-" + "gatewaytest" * 4,
    "GEMINI_API_KEY": "AIza" + "gatewaytest" * 3 + "Q",
}
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The keys set, and every request that is not to loopback sent to a dead proxy: a
    provider that ignored its variable would fail here, never reach the internet."""
    clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", DEAD_PROXY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    yield


def point_at(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """All three providers at ``url``, each variable spelt as its SDK takes it."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"{url}/")


def files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_gateway_serves_the_built_in_providers_and_gets_its_own_cache_keys(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, gateway: None
) -> None:
    pytester.makefile(".eval.yaml", gateway=SUITE)
    first, second = ProviderServer(), ProviderServer()
    try:
        point_at(monkeypatch, first.url)
        result = pytester.runpytest("-p", "no:cacheprovider")
        result.assert_outcomes(passed=3)
        paths = sorted(r.path for r in first.server.requests if r.method == "POST")
        assert paths == [
            "/v1/chat/completions",
            "/v1/messages",
            "/v1beta/models/gemini-2.5-flash:generateContent",
        ]
        shown = (
            f"anthropic at ANTHROPIC_BASE_URL={first.url}, google at GOOGLE_GEMINI_BASE_URL="
            f"{first.url}, openai at OPENAI_BASE_URL={first.url}/v1"
        )
        result.stdout.fnmatch_lines([f"evalmine: base URLs: {shown}"])
        assert latest_report(pytester.path, "gateway")["adapter_routing"] == (
            f"by provider prefix; base URLs: {shown}"
        )
        # Another gateway: other keys, so its answers are asked for, not served from the cache.
        point_at(monkeypatch, second.url)
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3)
        assert second.provider.online_calls == 3
        # The first one again: its answers are the cached ones.
        point_at(monkeypatch, first.url)
        pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=3)
        assert first.provider.online_calls == 3
        assert latest_report(pytester.path, "gateway")["calls"] == {"made": 0, "cached": 3}
    finally:
        first.stop()
        second.stop()
    for key in KEYS.values():
        assert files_holding(pytester.path, key) == []


@pytest.mark.parametrize(
    ("adapter_class", "default"),
    [
        (OpenAIAdapter, "https://api.openai.com/v1"),
        (AnthropicAdapter, "https://api.anthropic.com"),
        (GeminiAdapter, "https://generativelanguage.googleapis.com/v1beta"),
    ],
    ids=["openai", "anthropic", "google"],
)
def test_the_cache_key_holds_a_providers_other_base_url(adapter_class: type, default: str) -> None:
    request = Request("provider/some-model", "hello")
    keys = [
        cache_key(adapter_class(base_url=url), request)
        for url in (default, f"{default}/", "http://127.0.0.1:8080", "http://127.0.0.1:8081")
    ]
    assert keys[0] == keys[1], "the provider's own server, spelt another way"
    assert len(set(keys)) == 3
    # The provider's own keys are what they were before base URLs existed.
    assert adapter_class().key_extra(request) == {}


def test_the_registry_points_each_provider_where_its_variable_says() -> None:
    environ = {
        "OPENAI_BASE_URL": "http://gateway.example/openai/v1",
        "ANTHROPIC_BASE_URL": "http://gateway.example/anthropic/",
        "GOOGLE_GEMINI_BASE_URL": "https://gateway.example/google",
        "GEMINI_BASE_URL": "http://not-the-sdks-variable.example",
    }
    registry = default_registry(base_urls=base_urls_from(environ))
    urls = {
        provider: registry.adapter_for(f"{provider}/m").base_url  # type: ignore[attr-defined]
        for provider in ("openai", "anthropic", "google")
    }
    assert urls == {
        "openai": "http://gateway.example/openai/v1",
        "anthropic": "http://gateway.example/anthropic",
        "google": "https://gateway.example/google/v1beta",  # the SDK appends the API version
    }
    unset = default_registry(base_urls=base_urls_from({"OPENAI_BASE_URL": " "}))
    assert unset.adapter_for("openai/m").base_url == "https://api.openai.com/v1"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("ftp://gateway.example/v1", "'ftp://gateway.example/v1' is not an http:// or https://"),
        ("gateway.example/v1", "is not an http:// or https:// URL with a host"),
        ("http://me:hunter2-secret@gateway.example/v1", "the URL holds credentials"),
    ],
)
def test_a_bad_base_url_is_refused_naming_its_variable(value: str, problem: str) -> None:
    with pytest.raises(EvalmineError) as refused:
        base_urls_from({"OPENAI_BASE_URL": value})
    message = str(refused.value)
    assert message.startswith("OPENAI_BASE_URL: ") and problem in message
    assert "hunter2" not in message


def test_a_run_with_a_bad_base_url_stops_before_any_call(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, gateway: None
) -> None:
    pytester.makefile(".eval.yaml", gateway=SUITE)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://me:hunter2-secret@127.0.0.1:1")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    output = result.stdout.str() + result.stderr.str()
    assert "ANTHROPIC_BASE_URL: the URL holds credentials" in output
    assert "hunter2" not in output and "Traceback" not in output


def test_validate_names_the_base_urls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gateway.eval.yaml").write_text(SUITE)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1?token=not-shown")
    assert main(["validate", "--rootdir", str(tmp_path), "gateway.eval.yaml"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "base URLs: openai at OPENAI_BASE_URL=http://127.0.0.1:8080/v1"
    assert "not-shown" not in out
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://127.0.0.1/v1")
    assert main(["validate", "--rootdir", str(tmp_path), "gateway.eval.yaml"]) == 4
    assert "evalmine: OPENAI_BASE_URL: " in capsys.readouterr().err
