"""The one rule that reads a model list entry as a contender (spec: "Variants").

An entry ``MODEL@VARIANT`` asks MODEL with the suite's or the task's variant VARIANT applied;
any other entry is a model. A model string may hold an ``@`` itself (a Vertex-style version
behind a gateway, ``gw/claude-sonnet-4@20250514``), so the text after the last ``@`` is a
variant only when it is the name of a declared one. Everything here is pure text: the loader
declares the variants, the run keys everything by the contender string and resolves it to
its model for the adapter and the price.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from .problems import quoted

SEPARATOR = "@"


def split_contender(contender: str, declared: Collection[str]) -> tuple[str, str | None]:
    """``(model, variant)`` of a model list entry: ``("p/m", "concise")`` for ``p/m@concise``
    when ``concise`` is declared, else ``(contender, None)``."""
    model, separator, name = contender.rpartition(SEPARATOR)
    if separator and model and name in declared:
        return model, name
    return contender, None


def undeclared_suffix(contender: str, declared: Collection[str]) -> str | None:
    """The text after the last ``@`` of a model string's name when it is not a declared
    variant (it can then only be part of the model string), else None."""
    _provider, _slash, name = contender.partition("/")
    if SEPARATOR not in name or split_contender(contender, declared)[1] is not None:
        return None
    return name.rpartition(SEPARATOR)[2]


def suffix_problem(contender: str, declared: Sequence[str], unknown: str) -> str | None:
    """Why a model string ending in ``@SUFFIX`` is refused when, as a whole, it is no known
    model (``unknown`` says why: no price, no adapter): the suffix is not a declared variant
    either, and may have been meant as one. None for any other model string."""
    suffix = undeclared_suffix(contender, declared)
    if suffix is None:
        return None
    names = ", ".join(declared) if declared else "none declared"
    return (
        f"{quoted(contender)}: {quoted(suffix)} after '@' is not a variant of this suite "
        f"(its variants: {names}), nor is the whole string a known model: {unknown}"
    )


def missing_variant_problem(contender: str, variant: str, without: Sequence[str]) -> str:
    """A contender whose task-level variant some tasks do not declare."""
    shown = ", ".join(quoted(task) for task in without)
    return (
        f"{quoted(contender)}: variant {quoted(variant)} is not declared for task"
        f"{'s' if len(without) > 1 else ''} {shown} (declare it under the task's variants, or "
        "under the suite's variants to apply it to every task)"
    )
