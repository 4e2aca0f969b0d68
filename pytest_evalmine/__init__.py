"""pytest-evalmine: evaluate LLM model changes on your own tasks, inside pytest.

The names a user may import are re-exported here lazily (PEP 562), so that importing the
plugin stays as light as pytest itself: ``from pytest_evalmine import Response`` loads the
adapter records only when asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "Adapter": "pytest_evalmine.adapters.base",
    "AdapterError": "pytest_evalmine.adapters.base",
    "Request": "pytest_evalmine.adapters.base",
    "Response": "pytest_evalmine.adapters.base",
    "Usage": "pytest_evalmine.adapters.base",
    "code_fingerprint": "pytest_evalmine.adapters.base",
    "AdapterRegistry": "pytest_evalmine.adapters.registry",
    "default_registry": "pytest_evalmine.adapters.builtin",
    "EvalClient": "pytest_evalmine.run.client",
    "EvalmineError": "pytest_evalmine.errors",
    "CheckInput": "pytest_evalmine.scoring.checkers",
    "Verdict": "pytest_evalmine.scoring.checkers",
    "NO_GOLD": "pytest_evalmine.suite.model",
}

__all__ = [
    "NO_GOLD",
    "Adapter",
    "AdapterError",
    "AdapterRegistry",
    "CheckInput",
    "EvalClient",
    "EvalmineError",
    "Request",
    "Response",
    "Usage",
    "Verdict",
    "__version__",
    "code_fingerprint",
    "default_registry",
]

if TYPE_CHECKING:
    from .adapters.base import Adapter, AdapterError, Request, Response, Usage, code_fingerprint
    from .adapters.builtin import default_registry
    from .adapters.registry import AdapterRegistry
    from .errors import EvalmineError
    from .run.client import EvalClient
    from .scoring.checkers import CheckInput, Verdict
    from .suite.model import NO_GOLD


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_evalmine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
