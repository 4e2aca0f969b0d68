"""The built-in providers (fake, Anthropic, OpenAI, Gemini, Ollama) and declared endpoints, as
one registry. Each provider module (and httpx) is imported only when its adapter is first
built, so naming a provider costs nothing until it is called."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from .base import Adapter
from .registry import AdapterRegistry


def default_registry(
    *,
    fake_everything: bool = False,
    fake_options: Any = None,
    endpoints: Sequence[Any] = (),
    base_urls: Sequence[Any] = (),
) -> AdapterRegistry:
    """The built-in adapters and the declared endpoints. Provider modules (and httpx) are
    imported only when an adapter is first needed. ``base_urls`` (``run.endpoints.BaseUrl``)
    point built-in providers at other servers, as their SDKs' variables do."""
    from .fake import FakeAdapter, FakeOptions

    options = fake_options or FakeOptions()
    registry = AdapterRegistry(route_all_to="fake" if fake_everything else None)
    registry.register("fake", lambda: FakeAdapter(options))
    urls = {base.provider: base.adapter_url for base in base_urls}
    registry.register("anthropic", _lazy("anthropic", "AnthropicAdapter", urls.get("anthropic")))
    registry.register("openai", _lazy("openai", "OpenAIAdapter", urls.get("openai")))
    registry.register("google", _lazy("gemini", "GeminiAdapter", urls.get("google")))
    registry.register("ollama", _lazy("ollama", "OllamaAdapter"))
    for endpoint in endpoints:
        registry.register(endpoint.name, endpoint.factory())
    return registry


def _lazy(module: str, cls: str, base_url: str | None = None) -> Callable[[], Adapter]:
    def create() -> Adapter:
        imported = importlib.import_module(f"pytest_evalmine.adapters.{module}")
        options = {"base_url": base_url} if base_url is not None else {}
        return getattr(imported, cls)(**options)

    return create
