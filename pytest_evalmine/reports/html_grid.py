"""report.html's grid of the cases view (spec: "report.html", "The grid"): a row per task x
case, a column per contender, filled by ``assets/grid.js`` from the cases view's data. This
module adds the grid's markup to the cases view's: the switch between the two views, the
"different outcomes only" filter and the grid's table, in its own scrolling box."""

from __future__ import annotations

VIEW_SWITCH = (
    '<p class="view-switch" role="group" aria-label="how the cases view shows the answers">'
    'view: <button id="view-list" type="button" aria-pressed="true">answers, one row each'
    '</button> <button id="view-grid" type="button" aria-pressed="false">grid: cases x '
    "contenders</button></p>\n"
)
DIFFER_FILTER = '<label><input id="f-differ" type="checkbox"> different outcomes only</label>\n'
GRID_TABLE = (
    '\n<div id="grid-wrap" class="table-wrap grid-wrap" hidden><table id="cases-grid">'
    '<thead><tr id="grid-head"></tr></thead><tbody id="grid-body"></tbody></table></div>'
)

# Where each part goes in the cases view's markup (``cases_view.CASES_VIEW``).
_LIST_TABLE = '<div class="table-wrap"><table id="cases-table">'
_SEARCH = '<input id="f-search"'
_LIST_END = '<tbody id="cases-body"></tbody></table></div>'


def with_grid(cases_view: str) -> str:
    """The cases view's markup with the grid's parts. Raises when the view no longer has
    the places they go (a changed view must place them anew, never lose them silently)."""
    for anchor in (_LIST_TABLE, _SEARCH, _LIST_END):
        if cases_view.count(anchor) != 1:
            raise ValueError(f"the cases view has no single {anchor!r} to place the grid by")
    return (
        cases_view.replace(_SEARCH, DIFFER_FILTER + _SEARCH)
        .replace(_LIST_TABLE, VIEW_SWITCH + _LIST_TABLE)
        .replace(_LIST_END, _LIST_END + GRID_TABLE)
    )
