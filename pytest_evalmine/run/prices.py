"""The price table (spec: "Prices"): dollars per million tokens, pinned to a date.

A model without a row is an error before any call, never a cost of $0.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..adapters.base import Usage
from ..errors import PriceError

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class PriceRow:
    model: str
    input: float
    output: float
    cached_input: float | None
    cache_write: float | None
    source: str
    read: str
    note: str = ""

    @property
    def free(self) -> bool:
        return self.input == 0 and self.output == 0

    def cost(self, usage: Usage) -> float:
        # A missing cache rate is billed as plain input: an upper bound, never an undercount.
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cached_input_tokens * cached
            + usage.cache_write_tokens * write
        ) / PER_MILLION


@dataclass(frozen=True)
class BatchRate:
    """A provider's batch price (spec: "Batch"): its online input and output rates times
    ``factor``. Cache rates stay at their online rates: whether a batch discount applies to
    them is not on the providers' pages we read, and an online rate is an upper bound."""

    provider: str
    factor: float
    source: str
    read: str
    note: str = ""
    # A batched request's prompt-cache write, in times the row's online input rate, when it
    # is not the row's own write rate: Anthropic's batched requests ask for the 1-hour cache
    # (a batch may outlive 5 minutes), whose writes cost 2x input instead of 1.25x.
    cache_write_input: float | None = None

    def applied(self, row: PriceRow) -> PriceRow:
        write = row.input if row.cache_write is None else row.cache_write
        if self.cache_write_input is not None:
            write = row.input * self.cache_write_input
        return PriceRow(
            model=row.model,
            input=row.input * self.factor,
            output=row.output * self.factor,
            cached_input=row.input if row.cached_input is None else row.cached_input,
            cache_write=write,
            source=f"{row.source}; batch {self.factor:g}x: {self.source}",
            read=self.read,
            note=row.note,
        )


@dataclass(frozen=True)
class PriceTable:
    pinned: str
    rows: tuple[PriceRow, ...]
    # Rows declared by endpoints (``NAME/*``): they win over every row they match, exact rows
    # included, so a gateway named ``anthropic`` is priced at its own cost, not the list price.
    declared: tuple[PriceRow, ...] = ()
    # Batch prices by provider (``batch:`` in the table); a provider without one is priced at
    # its online rates when its calls go by batch (an upper bound).
    batch: tuple[BatchRate, ...] = ()
    # model -> the row ``lookup`` found: planning asks it for every request (18,000 times in
    # a 3,000-case rerun, each scanning the patterns), and the table never changes.
    _found: dict[str, PriceRow] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    # (row, provider) -> the row ``batch_row`` built, or None when it is ``row`` itself:
    # planning asks it for every batched request, and each answer would be a new row.
    _batched: dict[tuple[PriceRow, str], PriceRow | None] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def batch_row(self, row: PriceRow, provider: str) -> PriceRow:
        """``row`` as a call sent in a provider batch is charged: the provider's batch rate
        applied, or ``row`` itself when the table has none for ``provider`` (or the row is a
        declared cost, which is the endpoint's or adapter's own price)."""
        key = (row, provider)
        try:
            batched = self._batched[key]
        except KeyError:
            rate = next((r for r in self.batch if r.provider == provider), None)
            if rate is None or row.read == "declared":
                batched = self._batched[key] = None
            else:
                batched = self._batched[key] = rate.applied(row)
        return row if batched is None else batched

    def lookup(self, model: str) -> PriceRow:
        """A declared row first (the longest matching), then the exact row, then the longest
        matching ``provider/*`` pattern."""
        row = self._found.get(model)
        if row is None:
            row = self._found[model] = self._lookup(model)
        return row

    def _lookup(self, model: str) -> PriceRow:
        declared = _longest_match(self.declared, model)
        if declared is not None:
            return declared
        for row in self.rows:
            if row.model == model:
                return row
        pattern = _longest_match([r for r in self.rows if "*" in r.model], model)
        if pattern is not None:
            return pattern
        raise PriceError(
            f"no price for model {model!r} in the price table pinned {self.pinned}; "
            f"known models: {', '.join(self.known())}. Add a row with --evalmine-prices=FILE."
        )

    def known(self) -> list[str]:
        return sorted({row.model for row in (*self.declared, *self.rows)})

    def all_rows(self) -> tuple[PriceRow, ...]:
        """Every row, the declared ones first (each model once: the row that wins)."""
        declared = {row.model for row in self.declared}
        return (*self.declared, *(row for row in self.rows if row.model not in declared))

    def with_rows(self, rows: tuple[PriceRow, ...]) -> PriceTable:
        """The table with ``rows`` declared (an endpoint's cost): each wins over every row it
        matches, the exact rows of the shipped and the user's tables included."""
        models = {row.model for row in rows}
        kept = tuple(row for row in self.declared if row.model not in models)
        return PriceTable(
            pinned=self.pinned, rows=self.rows, declared=(*rows, *kept), batch=self.batch
        )

    def merged(self, other: PriceTable) -> PriceTable:
        """``other``'s rows win over rows for the same model."""
        mine = [row for row in self.rows if row.model not in {r.model for r in other.rows}]
        return PriceTable(
            pinned=f"{self.pinned}+{other.pinned}",
            rows=(*other.rows, *mine),
            declared=(*other.declared, *self.declared),
            batch=(
                *other.batch,
                *(r for r in self.batch if r.provider not in {b.provider for b in other.batch}),
            ),
        )


def _longest_match(rows: Sequence[PriceRow], model: str) -> PriceRow | None:
    """The row with the longest ``model`` (exact, or a ``provider/*`` pattern) that matches."""
    for row in sorted(rows, key=lambda r: -len(r.model)):
        if row.model == model or fnmatch.fnmatchcase(model, row.model):
            return row
    return None


def load_prices(extra: str | Path | None = None) -> PriceTable:
    """The shipped table, merged with a user's table when one is given."""
    shipped = resources.files("pytest_evalmine.run").joinpath("prices.yaml").read_text("utf-8")
    table = _parse(shipped, "prices.yaml (shipped)", shipped=True)
    if extra:
        path = Path(extra)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise PriceError(f"{path}: cannot read price table: {reason}") from None
        table = table.merged(_parse(text, str(path), shipped=False))
    return table


def declared_row(model: str, cost: Any, declared_by: str) -> PriceRow:
    """A price row from a declared cost: ``"free"``, or ``{input, output[, cached_input]}``
    in USD per million tokens (an endpoint's ``cost``, an adapter's ``cost`` attribute)."""
    if cost == "free":
        return PriceRow(
            model=model, input=0.0, output=0.0, cached_input=0.0, cache_write=0.0,
            source=f"{declared_by}: declared free", read="declared",
        )  # fmt: skip
    rates = ("input", "output", "cached_input")
    if (
        not isinstance(cost, dict)
        or not {"input", "output"} <= set(cost) <= set(rates)
        or not all(_is_price(cost[rate]) for rate in cost)
    ):
        raise PriceError(
            f"{declared_by}: cost is 'free' or {{input, output, cached_input}} in USD per "
            f"million tokens (finite, >= 0), not {cost!r}"[:300]
        )
    return PriceRow(
        model=model,
        input=float(cost["input"]),
        output=float(cost["output"]),
        cached_input=_optional_float(cost.get("cached_input")),
        cache_write=None,
        source=f"{declared_by}: declared prices",
        read="declared",
    )


def _parse(text: str, shown: str, *, shipped: bool) -> PriceTable:
    """The shipped table must cite its sources; a user's table needs only model and rates
    (its file name stands in for the date and source it leaves out)."""
    from ..errors import SuiteError
    from ..suite.reading import parse_yaml

    try:
        document: Any = parse_yaml(text, shown)
    except SuiteError as exc:
        raise PriceError(str(exc)) from None
    if not isinstance(document, dict) or not isinstance(document.get("models"), list):
        raise PriceError(f"{shown}: a price table is a mapping with a 'models' list")
    if shipped and not document.get("pinned"):
        raise PriceError(f"{shown}: 'pinned' (the date the prices were read) is missing")
    rows = []
    allowed = set(PriceRow.__dataclass_fields__)
    required = (
        ("model", "input", "output", "source", "read") if shipped else ("model", "input", "output")
    )
    for index, raw in enumerate(document["models"]):
        where = f"{shown}: models[{index}]"
        if not isinstance(raw, dict):
            raise PriceError(f"{where}: a row is a mapping")
        unknown = set(raw) - allowed
        if unknown:
            raise PriceError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        for name in required:
            if name not in raw:
                raise PriceError(f"{where}: missing {name!r}")
        for rate in ("input", "output", "cached_input", "cache_write"):
            value = raw.get(rate)
            if value is not None and not _is_price(value):
                raise PriceError(f"{where}.{rate}: a price is a finite number >= 0")
        rows.append(
            PriceRow(
                model=str(raw["model"]),
                input=float(raw["input"]),
                output=float(raw["output"]),
                cached_input=_optional_float(raw.get("cached_input")),
                cache_write=_optional_float(raw.get("cache_write")),
                source=str(raw.get("source", shown)),
                read=str(raw.get("read", "")),
                note=str(raw.get("note", "")),
            )
        )
    return PriceTable(
        pinned=str(document.get("pinned") or shown),
        rows=tuple(rows),
        batch=_batch_rates(document.get("batch"), shown, shipped=shipped),
    )


def _batch_rates(raw: Any, shown: str, *, shipped: bool) -> tuple[BatchRate, ...]:
    """The table's ``batch`` list: ``{provider, factor, source, read[, note]}`` each (a
    user's table may leave out source and read)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise PriceError(f"{shown}: 'batch' is a list of {{provider, factor, source, read}}")
    rates = []
    allowed = set(BatchRate.__dataclass_fields__)
    required = ("provider", "factor", "source", "read") if shipped else ("provider", "factor")
    for index, entry in enumerate(raw):
        where = f"{shown}: batch[{index}]"
        if not isinstance(entry, dict):
            raise PriceError(f"{where}: an entry is a mapping")
        unknown = set(entry) - allowed
        if unknown:
            raise PriceError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        for name in required:
            if name not in entry:
                raise PriceError(f"{where}: missing {name!r}")
        factor = entry["factor"]
        if not _is_price(factor) or factor > 1:
            raise PriceError(f"{where}.factor: a number from 0 to 1 (of the online price)")
        write = entry.get("cache_write_input")
        if write is not None and not _is_price(write):
            raise PriceError(f"{where}.cache_write_input: a number >= 0 (times the input rate)")
        rates.append(
            BatchRate(
                provider=str(entry["provider"]),
                factor=float(factor),
                source=str(entry.get("source", shown)),
                read=str(entry.get("read", "")),
                note=str(entry.get("note", "")),
                cache_write_input=None if write is None else float(write),
            )
        )
    return tuple(rates)


def _is_price(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)
