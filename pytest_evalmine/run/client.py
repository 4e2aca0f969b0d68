"""``EvalClient``: model calls from plain test functions, through the one dispatcher."""

from __future__ import annotations

from typing import Any

from ..adapters.base import Request, Response
from ..errors import EvalmineError
from .dispatch import OK, Dispatcher, Outcome


class EvalClient:
    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.outcomes: list[Outcome] = []

    def complete(self, model: str, prompt: str, **fields: Any) -> Response:
        """One cached, budgeted call; raises ``EvalmineError`` when no answer arrives."""
        planned = self.dispatcher.plan([Request(model=model, prompt=prompt, **fields)])
        outcome = self.dispatcher.run(planned)[planned[0].key]
        self.outcomes.append(outcome)
        if outcome.status != OK or outcome.response is None:
            raise EvalmineError(f"{model}: {outcome.status}: {outcome.error}")
        return outcome.response
