"""report.html's building blocks (spec: "report.html"): escaping, tables in their scrolling
boxes, links into the cases view, numbers as the page prints them, the inline assets and the
Content-Security-Policy that keeps the page off the network.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from .render import milliseconds, money, number, percent

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def verdict_css() -> str:
    """The banner's style rules, for a page that embeds ``verdict_banner``."""
    return asset("verdict.css")


def page_css() -> str:
    """The page's own style rules, for the suite's index page too."""
    return asset("page.css")


def asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text("utf-8")


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    task_links: bool = False,
    links: Sequence[str] | None = None,
) -> str:
    """A table in its own scrolling box (a wide table never widens the page). ``task_links``:
    the first cell is a task id, linked to the cases view filtered to it; ``links``: each
    row's first cell links there instead (an escaped href per row)."""
    if task_links:
        links = [cases_href(task=row[0]) for row in rows]
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td><a href="{links[r]}">{esc(c)}</a></td>'
            if links and i == 0
            else f"<td>{esc(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for r, row in enumerate(rows)
    )
    return (
        f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
        "</table></div>"
    )


def cases_href(**filters: str | None) -> str:
    """A link to the cases view with filters: ``#cases?task=triage&model=fake%2Fbeta``."""
    query = urlencode({key: value for key, value in filters.items() if value})
    return esc(f"#cases?{query}" if query else "#cases")


def as_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def as_int(value: Any) -> int:
    number = as_float(value)
    return int(number) if number is not None else 0


def pct(value: Any) -> str:
    return percent(as_float(value))


def num(value: Any) -> str:
    return number(as_float(value))


def ms(value: Any) -> str:
    return milliseconds(as_float(value))


def usd(value: Any) -> str:
    amount = as_float(value)
    return "-" if amount is None else money(amount)
