"""Model adapters: the ``Adapter`` interface and its records (``base``), the registry that
resolves a model string's provider prefix (``registry``), the built-in providers (``builtin``,
importing each provider module only when first used) and the providers themselves. May import
``suite.canonical`` and ``errors``; never ``run`` or anything above it."""

from .base import Adapter, AdapterError, Request, Response, Usage
from .builtin import default_registry
from .registry import AdapterRegistry

__all__ = [
    "Adapter",
    "AdapterError",
    "AdapterRegistry",
    "Request",
    "Response",
    "Usage",
    "default_registry",
]
