"""Model adapters: one interface, a registry keyed by the model string's provider prefix."""

from .base import (
    Adapter,
    AdapterError,
    AdapterRegistry,
    Request,
    Response,
    Usage,
    default_registry,
)

__all__ = [
    "Adapter",
    "AdapterError",
    "AdapterRegistry",
    "Request",
    "Response",
    "Usage",
    "default_registry",
]
