"""The price table: the shipped rows, lookup, cost arithmetic and user tables."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from pytest_evalmine.adapters.base import Usage
from pytest_evalmine.errors import PriceError
from pytest_evalmine.run.prices import PriceRow, PriceTable, load_prices

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def write_table(tmp_path: Path, text: str, name: str = "my-prices.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def row(
    model: str,
    *,
    input: float = 1.0,
    output: float = 2.0,
    cached_input: float | None = None,
    cache_write: float | None = None,
) -> PriceRow:
    return PriceRow(
        model=model,
        input=input,
        output=output,
        cached_input=cached_input,
        cache_write=cache_write,
        source="https://example.com/pricing",
        read="2026-01-01",
    )


# --- the shipped table -----------------------------------------------------------------------


def test_shipped_table_loads_with_rows() -> None:
    table = load_prices()
    assert isinstance(table, PriceTable)
    assert len(table.rows) >= 10
    models = [r.model for r in table.rows]
    assert len(models) == len(set(models)), "a model has two rows"
    assert "anthropic/claude-haiku-4-5" in models


def test_shipped_pinned_is_a_date() -> None:
    pinned = load_prices().pinned
    assert DATE.match(pinned), pinned
    dt.date.fromisoformat(pinned)


def test_every_shipped_row_has_a_source_and_a_read_date() -> None:
    table = load_prices()
    for price in table.rows:
        assert price.source.strip(), price.model
        if not price.model.startswith("fake/"):
            assert price.source.startswith("https://"), price.model
        assert DATE.match(price.read), (price.model, price.read)
        read = dt.date.fromisoformat(price.read)
        assert read <= dt.date.fromisoformat(table.pinned), price.model


def test_every_shipped_row_has_sane_rates() -> None:
    for price in load_prices().rows:
        assert price.input >= 0 and price.output >= 0, price.model
        for cache_rate in (price.cached_input, price.cache_write):
            assert cache_rate is None or cache_rate >= 0, price.model


def test_fake_models_are_priced_above_zero_for_any_name() -> None:
    table = load_prices()
    for name in ("fake/x", "fake/alpha", "fake/judge-1", "fake/a.b-c"):
        price = table.lookup(name)
        assert price.model == "fake/*"
        assert price.input > 0
        assert price.output > 0
        assert not price.free
        assert price.cost(Usage(input_tokens=1000, output_tokens=1000)) > 0


def test_pattern_does_not_match_other_providers() -> None:
    with pytest.raises(PriceError):
        load_prices().lookup("notfake/x")


def test_unknown_model_raises_and_lists_known_models() -> None:
    table = load_prices()
    with pytest.raises(PriceError) as caught:
        table.lookup("acme/unheard-of-1")
    message = str(caught.value)
    assert "acme/unheard-of-1" in message
    assert table.pinned in message
    for known in ("anthropic/claude-haiku-4-5", "openai/gpt-5-mini", "fake/*"):
        assert known in message
    assert table.known() == sorted(r.model for r in table.rows)


def test_exact_shipped_rows_are_found() -> None:
    price = load_prices().lookup("anthropic/claude-haiku-4-5")
    assert price.model == "anthropic/claude-haiku-4-5"
    assert (price.input, price.output, price.cached_input, price.cache_write) == (
        1.0,
        5.0,
        0.10,
        1.25,
    )


# --- lookup order ----------------------------------------------------------------------------


def test_exact_row_beats_a_pattern_listed_before_it() -> None:
    table = PriceTable(
        pinned="2026-01-01",
        rows=(row("acme/*", input=9.0), row("acme/special", input=1.0)),
    )
    assert table.lookup("acme/special").input == 1.0
    assert table.lookup("acme/other").input == 9.0


def test_longest_pattern_wins() -> None:
    table = PriceTable(
        pinned="2026-01-01",
        rows=(row("acme/*", input=9.0), row("acme/big-*", input=5.0)),
    )
    assert table.lookup("acme/big-1").input == 5.0
    assert table.lookup("acme/small-1").input == 9.0


# --- cost arithmetic -------------------------------------------------------------------------


def test_cost_with_all_four_token_kinds_by_hand() -> None:
    price = row("acme/m", input=1.0, output=4.0, cached_input=0.5, cache_write=2.0)
    usage = Usage(
        input_tokens=1000, output_tokens=2000, cached_input_tokens=3000, cache_write_tokens=4000
    )
    # 1000*$1/M + 2000*$4/M + 3000*$0.50/M + 4000*$2/M
    # = $0.001 + $0.008 + $0.0015 + $0.008 = $0.0185
    assert price.cost(usage) == pytest.approx(0.0185, rel=1e-12)


def test_cost_of_a_shipped_row_by_hand() -> None:
    price = load_prices().lookup("anthropic/claude-haiku-4-5")
    usage = Usage(
        input_tokens=1000, output_tokens=2000, cached_input_tokens=3000, cache_write_tokens=4000
    )
    # $1 in, $5 out, $0.10 cache read, $1.25 cache write, per million:
    # 0.001 + 0.010 + 0.0003 + 0.005 = 0.0163
    assert price.cost(usage) == pytest.approx(0.0163, rel=1e-12)


def test_cost_of_one_million_tokens_is_the_list_price() -> None:
    price = row("acme/m", input=3.0, output=15.0)
    assert price.cost(Usage(input_tokens=1_000_000)) == pytest.approx(3.0)
    assert price.cost(Usage(output_tokens=1_000_000)) == pytest.approx(15.0)
    assert price.cost(Usage()) == 0


def test_missing_cache_rates_fall_back_to_the_input_rate() -> None:
    price = row("acme/m", input=2.0, output=8.0, cached_input=None, cache_write=None)
    usage = Usage(cached_input_tokens=500_000, cache_write_tokens=250_000)
    # both kinds billed as plain input: 750_000 * $2/M = $1.50
    assert price.cost(usage) == pytest.approx(1.5, rel=1e-12)


def test_missing_cache_write_alone_falls_back_to_input() -> None:
    price = row("acme/m", input=2.0, output=8.0, cached_input=0.2, cache_write=None)
    usage = Usage(cached_input_tokens=1_000_000, cache_write_tokens=1_000_000)
    # cache read at $0.20, cache write at the input rate $2.00
    assert price.cost(usage) == pytest.approx(2.2, rel=1e-12)


def test_shipped_row_without_cache_write_bills_writes_as_input() -> None:
    price = load_prices().lookup("google/gemini-2.5-flash")
    assert price.cache_write is None
    # 1000 cache-write tokens at the $0.30 input rate
    assert price.cost(Usage(cache_write_tokens=1000)) == pytest.approx(0.0003, rel=1e-12)
    # OpenAI bills no cache writes before GPT-5.6 (the prompt-caching guide): a rate of 0.
    assert load_prices().lookup("openai/gpt-5-mini").cache_write == 0.0


def test_fake_cost_by_hand() -> None:
    price = load_prices().lookup("fake/x")
    usage = Usage(
        input_tokens=2000, output_tokens=1000, cached_input_tokens=10_000, cache_write_tokens=100
    )
    # $0.50 in, $1.50 out, $0.05 cached, no cache-write rate so $0.50:
    # 0.001 + 0.0015 + 0.0005 + 0.00005 = 0.00305
    assert price.cost(usage) == pytest.approx(0.00305, rel=1e-12)


def test_free_row() -> None:
    assert row("local/m", input=0.0, output=0.0).free
    assert not row("local/m", input=0.0, output=0.1).free


# --- user tables -----------------------------------------------------------------------------

USER_TABLE = """\
pinned: "2027-02-01"
models:
  - model: anthropic/claude-haiku-4-5
    input: 9.0
    output: 19.0
    source: https://example.com/our-contract
    read: "2027-01-31"
  - model: acme/house-model
    input: 0.25
    output: 0.75
    cached_input: 0.025
    cache_write: 0.3
    source: https://example.com/acme
    read: 2027-01-30
    note: negotiated
"""


def test_user_table_overrides_a_shipped_row_and_adds_one(tmp_path: Path) -> None:
    shipped = load_prices()
    table = load_prices(write_table(tmp_path, USER_TABLE))
    haiku = table.lookup("anthropic/claude-haiku-4-5")
    assert (haiku.input, haiku.output) == (9.0, 19.0)
    assert haiku.cached_input is None
    assert haiku.source == "https://example.com/our-contract"
    acme = table.lookup("acme/house-model")
    assert (acme.input, acme.output, acme.cached_input, acme.cache_write) == (
        0.25,
        0.75,
        0.025,
        0.3,
    )
    assert acme.read == "2027-01-30"
    assert acme.note == "negotiated"
    # The rest of the shipped table is still there, once per model.
    assert table.lookup("openai/gpt-5-mini") == shipped.lookup("openai/gpt-5-mini")
    assert table.lookup("fake/x").model == "fake/*"
    assert len(table.rows) == len(shipped.rows) + 1
    assert [r.model for r in table.rows].count("anthropic/claude-haiku-4-5") == 1
    assert shipped.pinned in table.pinned and "2027-02-01" in table.pinned


def test_user_table_accepts_a_str_path(tmp_path: Path) -> None:
    table = load_prices(str(write_table(tmp_path, USER_TABLE)))
    assert table.lookup("acme/house-model").input == 0.25


def test_user_pattern_does_not_beat_a_shipped_exact_row(tmp_path: Path) -> None:
    text = """\
pinned: "2027-02-01"
models:
  - {model: "anthropic/*", input: 99, output: 99, source: "https://example.com", read: "2027-01-01"}
"""
    table = load_prices(write_table(tmp_path, text))
    assert table.lookup("anthropic/claude-haiku-4-5").input == 1.0
    assert table.lookup("anthropic/some-new-model").input == 99.0


VALID_ROW = (
    '{model: acme/m, input: 1, output: 2, source: "https://example.com", read: "2027-01-01"}'
)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            'pinned: "2027-01-01"\nmodels:\n  - {model: acme/m, input: 1, output: 2, '
            'source: "https://example.com", read: "2027-01-01", colour: red}\n',
            "unknown key 'colour'",
        ),
        (
            'pinned: "2027-01-01"\nmodels:\n  - {model: acme/m, input: -1, output: 2, '
            'source: "https://example.com", read: "2027-01-01"}\n',
            "input",
        ),
        (
            'pinned: "2027-01-01"\nmodels:\n  - {model: acme/m, input: 1, output: 2, '
            'cache_write: -0.5, source: "https://example.com", read: "2027-01-01"}\n',
            "cache_write",
        ),
        (
            'pinned: "2027-01-01"\nmodels:\n  - {model: acme/m, input: "cheap", output: 2, '
            'source: "https://example.com", read: "2027-01-01"}\n',
            "input",
        ),
        ("pinned: [unclosed\nmodels: {\n", "not valid YAML"),
        ("- just\n- a list\n", "models"),
        ('pinned: "2027-01-01"\n', "models"),
        ('pinned: "2027-01-01"\nmodels:\n  - just a string\n', "mapping"),
        (f'pinned: "2027-01-01"\nmodels:\n  - {VALID_ROW}\n  - {{model: acme/n}}\n', "models[1]"),
    ],
    ids=[
        "unknown-key",
        "negative-input",
        "negative-cache-write",
        "string-price",
        "not-yaml",
        "top-level-list",
        "no-models",
        "row-not-mapping",
        "second-row-incomplete",
    ],
)
def test_malformed_user_table_raises_naming_the_file(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write_table(tmp_path, text)
    with pytest.raises(PriceError) as caught:
        load_prices(path)
    message = str(caught.value)
    assert str(path) in message
    assert problem in message


@pytest.mark.parametrize(
    "text",
    [
        'pinned: "2027-01-01"\nmodels:\n  - {model: acme/m, input: true, output: 2, '
        'source: "https://example.com", read: "2027-01-01"}\n',
        'pinned: "2027-01-01"\nmodels:\n  - {model: acme/m, input: .nan, output: 2, '
        'source: "https://example.com", read: "2027-01-01"}\n',
    ],
    ids=["boolean-price", "nan-price"],
)
def test_user_table_needs_finite_numeric_prices(tmp_path: Path, text: str) -> None:
    """These once loaded: ``true`` as a price, and a NaN price (which makes every cost NaN).
    (A user's table may leave out 'pinned', 'source' and 'read': tests/test_own_adapter.py.)"""
    path = write_table(tmp_path, text)
    with pytest.raises(PriceError, match=re.escape(str(path))):
        load_prices(path)


def test_missing_user_table_raises_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(PriceError) as caught:
        load_prices(path)
    assert str(path) in str(caught.value)


def test_merged_rows_from_other_win() -> None:
    base = PriceTable(pinned="a", rows=(row("x/1", input=1.0), row("x/2", input=2.0)))
    other = PriceTable(pinned="b", rows=(row("x/2", input=20.0), row("x/3", input=3.0)))
    merged = base.merged(other)
    assert merged.pinned == "a+b"
    assert sorted(r.model for r in merged.rows) == ["x/1", "x/2", "x/3"]
    assert merged.lookup("x/2").input == 20.0
    assert merged.lookup("x/1").input == 1.0
