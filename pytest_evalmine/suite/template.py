"""Prompt templates (spec: "Templating"): ``{{ name }}`` placeholders, nothing else.

A template is parsed once per task into literal text and variable names, in one left-to-right
scan (``str.find``, no backtracking), so parsing and rendering take time linear in the text
whatever braces it holds. ``\\{{`` writes literal ``{{``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .problems import clip

NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*")
ESCAPE = "\\"


@dataclass(frozen=True)
class Template:
    """``parts`` alternate literal text (even indexes) and variable names (odd indexes)."""

    parts: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return self.parts[1::2]

    def render(self, values: Mapping[str, Any]) -> str:
        """One pass: braces inside substituted values stay literal. null renders empty."""
        out = []
        for index, part in enumerate(self.parts):
            if index % 2 == 0:
                out.append(part)
            else:
                value = values[part]
                out.append("" if value is None else str(value))
        return "".join(out)


def parse_template(text: str) -> Template:
    """Raises ``ValueError`` (a message for the suite author) on braces that are not a
    placeholder or are never closed."""
    parts: list[str] = []
    literal: list[str] = []
    position = 0
    while True:
        opening = text.find("{{", position)
        if opening < 0:
            break
        if opening > 0 and text[opening - 1] == ESCAPE:
            literal.append(text[position : opening - 1] + "{{")
            position = opening + 2
            continue
        closing = text.find("}}", opening + 2)
        if closing < 0:
            raise ValueError(
                f"{clip(text[opening:], 40)!r} opens a placeholder that is never closed "
                "with }}; write \\{{ for literal braces"
            )
        match = NAME.fullmatch(text, opening + 2, closing)
        if match is None:
            raise ValueError(
                f"{clip(text[opening : closing + 2], 40)!r} is not a placeholder; only "
                "{{ name }} is substituted (write \\{{ for literal braces)"
            )
        literal.append(text[position:opening])
        parts += ["".join(literal), match.group(1)]
        literal = []
        position = closing + 2
    literal.append(text[position:])
    parts.append("".join(literal))
    return Template(tuple(parts))
