"""Named endpoints (spec: "Endpoints"): OpenAI-compatible servers and Ollama hosts declared in
the suite or on the command line, each with its base URL, token variable and declared cost.

A model string ``NAME/model`` is served by endpoint NAME. An endpoint without a declared cost
adds no price row, so its models are refused before any call like any unpriced model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import EvalmineError
from ..options import FIXED_WIDTH_PREFIX as FIXED_PREFIX  # ``concurrency: fixed:N``
from ..options import parse_number
from .prices import PriceRow, declared_row

KINDS = ("openai-compatible", "ollama")


@dataclass(frozen=True)
class Endpoint:
    name: str
    base_url: str
    kind: str = "openai-compatible"
    api_key_env: str | None = None
    native_schema: bool = True
    free: bool = False
    input_price: float | None = None
    output_price: float | None = None
    cached_input_price: float | None = None
    rpm: int | None = None
    # The most calls at once; the dispatcher adapts below it unless ``concurrency_fixed``.
    concurrency: int | None = None
    concurrency_fixed: bool = False
    # Ollama only: thinking on/off, context size, sampling seed (all part of the cache key).
    think: bool | None = None
    num_ctx: int | None = None
    seed: int | None = None

    def price_row(self) -> PriceRow | None:
        if self.free:
            cost: Any = "free"
        elif self.input_price is None or self.output_price is None:
            return None
        else:
            cost = {"input": self.input_price, "output": self.output_price}
            if self.cached_input_price is not None:
                cost["cached_input"] = self.cached_input_price
        return declared_row(f"{self.name}/*", cost, f"endpoint {self.name}")

    def factory(self) -> Any:
        if self.kind == "ollama":
            from ..adapters.ollama import OllamaAdapter

            return lambda: OllamaAdapter(
                base_url=self.base_url, think=self.think, num_ctx=self.num_ctx, seed=self.seed
            )
        from ..adapters.openai import OpenAIAdapter

        return lambda: OpenAIAdapter(
            name=self.name,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            native_schema=self.native_schema,
        )


def from_suite(name: str, raw: dict[str, Any]) -> Endpoint:
    """From a suite's ``endpoints`` mapping (already validated by the suite schema)."""
    cost = raw.get("cost")
    prices = cost if isinstance(cost, dict) else {}
    return Endpoint(
        name=name,
        base_url=raw["base_url"],
        kind=raw.get("kind", "openai-compatible"),
        api_key_env=raw.get("api_key_env"),
        native_schema=raw.get("native_schema", True),
        free=cost == "free",
        input_price=prices.get("input"),
        output_price=prices.get("output"),
        cached_input_price=prices.get("cached_input"),
        rpm=raw.get("rpm"),
        concurrency=concurrency_width(raw.get("concurrency")),
        concurrency_fixed=str(raw.get("concurrency", "")).startswith(FIXED_PREFIX),
        think=raw.get("think"),
        num_ctx=raw.get("num_ctx"),
        seed=raw.get("seed"),
    )


def concurrency_width(value: int | str | None) -> int | None:
    """``N`` or ``fixed:N`` (as the suite schema admits them) -> N."""
    if isinstance(value, str):
        return int(value.removeprefix(FIXED_PREFIX))
    return value


def parse_option(spec: str) -> Endpoint:
    """``NAME=BASE_URL[,kind=ollama][,key_env=VAR][,free][,input=P,output=P][,rpm=N]
    [,concurrency=[fixed:]N][,prompted][,think=on|off][,num_ctx=N][,seed=N]``, as given to
    ``--evalmine-endpoint``: read into the shape of a suite's ``endpoints`` entry and held to
    the suite schema's rules for one (``schema_problem``), so a URL a suite refuses is
    refused here too."""
    head, *options = [part.strip() for part in spec.split(",")]
    name, sep, base_url = head.partition("=")
    if not sep or not name or not base_url:
        raise EvalmineError(f"--evalmine-endpoint={spec}: expected NAME=BASE_URL[,options]")
    raw: dict[str, Any] = {"base_url": base_url}
    prices: dict[str, float] = {}
    for option in options:
        key, _, value = option.partition("=")
        if key == "free" and not value:
            raw["cost"] = "free"
        elif key == "prompted" and not value:
            raw["native_schema"] = False
        elif key == "kind" and value in KINDS:
            raw["kind"] = value
        elif key == "key_env" and value:
            raw["api_key_env"] = value
        elif key in ("input", "output", "cached_input") and value:
            try:
                prices[key] = parse_number(value, f"--evalmine-endpoint={spec}: {key}", minimum=0.0)
            except ValueError as exc:
                raise EvalmineError(str(exc)) from None
        elif key in ("rpm", "concurrency", "num_ctx") and value.isdecimal() and int(value) >= 1:
            raw[key] = int(value)
        elif key == "concurrency" and value.startswith(FIXED_PREFIX):
            width = value.removeprefix(FIXED_PREFIX)
            if not (width.isdecimal() and int(width) >= 1):
                raise EvalmineError(f"--evalmine-endpoint={spec}: cannot read option {option!r}")
            raw[key] = f"{FIXED_PREFIX}{int(width)}"
        elif key == "seed" and value.lstrip("-").isdecimal():
            raw["seed"] = int(value)
        elif key == "think" and value in ("on", "off"):
            raw["think"] = value == "on"
        else:
            raise EvalmineError(f"--evalmine-endpoint={spec}: cannot read option {option!r}")
    if prices:
        if "cost" in raw:
            raise EvalmineError(f"--evalmine-endpoint={spec}: free and prices contradict")
        raw["cost"] = prices
    from ..suite.validate import schema_problem

    problem = schema_problem("endpoint", raw)
    if problem is not None:
        raise EvalmineError(f"--evalmine-endpoint={spec}: {problem}")
    return from_suite(name, raw)


# The variable each built-in provider's official SDK reads for its base URL (openai-python's
# and anthropic-sdk-python's clients, google-genai's ``_base_url.get_base_url``), read as the
# SDK reads it: OpenAI's holds the API version (``https://api.openai.com/v1``), Anthropic's
# and Gemini's do not (the API version, ``v1beta`` for Gemini, is appended).
BASE_URL_VARIABLES = (
    ("anthropic", "ANTHROPIC_BASE_URL", ""),
    ("google", "GOOGLE_GEMINI_BASE_URL", "/v1beta"),
    ("openai", "OPENAI_BASE_URL", ""),
)


@dataclass(frozen=True)
class BaseUrl:
    """A built-in provider pointed at another server (a company gateway) by its SDK's
    variable: no conftest hook needed; the server enters the cache key as an endpoint's."""

    provider: str
    variable: str
    url: str  # as the variable gives it
    suffix: str = ""  # what the provider's SDK appends (the API version)

    @property
    def adapter_url(self) -> str:
        return self.url.rstrip("/") + self.suffix

    @property
    def shown(self) -> str:
        """``VAR=URL`` without query or fragment (a token may sit there): for the terminal
        and the reports."""
        from ..adapters.http import normalised_base_url

        return f"{self.variable}={normalised_base_url(self.url)}"


def base_urls_from(environ: Mapping[str, str] | None = None) -> list[BaseUrl]:
    """The built-in providers' base-URL variables that are set (empty counts as unset, as
    for the SDKs' ``base_url or default``), each held to an endpoint's ``base_url`` rules;
    a URL with credentials is refused without being printed (``EvalmineError``)."""
    environ = os.environ if environ is None else environ
    found = []
    for provider, variable, suffix in BASE_URL_VARIABLES:
        value = environ.get(variable, "").strip()
        if not value:
            continue
        if "@" in urlsplit(value).netloc:
            raise EvalmineError(
                f"{variable}: the URL holds credentials (user:password@host), which would be "
                "sent to the server and printed in reports; remove them (keys come from the "
                "provider's key variable)"
            )
        from ..redaction import redact
        from ..suite.loader import schema_problem

        problem = schema_problem("endpoint", {"base_url": value})
        if problem is not None:
            raise EvalmineError(f"{variable}: {redact(problem.removeprefix('base_url: '))}")
        found.append(BaseUrl(provider, variable, value, suffix))
    return found


def base_urls_line(base_urls: list[BaseUrl]) -> str | None:
    """``base URLs: openai at OPENAI_BASE_URL=...``, for the run's header and ``evalmine
    validate``; None when no variable is set."""
    if not base_urls:
        return None
    return "base URLs: " + ", ".join(f"{b.provider} at {b.shown}" for b in base_urls)
