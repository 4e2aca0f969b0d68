"""The adapter registry: resolves a model string's provider prefix to one adapter instance.

Knows the ``Adapter`` interface only; which concrete adapters exist is ``builtin``'s business."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import EvalmineError
from .base import Adapter


@dataclass
class AdapterRegistry:
    """Adapters by provider prefix; ``route_all_to`` sends every model to one adapter."""

    factories: dict[str, Callable[[], Adapter]] = field(default_factory=dict)
    route_all_to: str | None = None
    _instances: dict[str, Adapter] = field(default_factory=dict, repr=False)

    def register(self, provider: str, factory: Callable[[], Adapter]) -> None:
        self.factories[provider] = factory
        self._instances.pop(provider, None)

    def provider_for(self, model: str) -> str:
        return self.route_all_to or model.split("/", 1)[0]

    def adapter_for(self, model: str) -> Adapter:
        provider = self.provider_for(model)
        if provider not in self._instances:
            if provider not in self.factories:
                known = ", ".join(sorted(self.factories)) or "none"
                raise EvalmineError(
                    f"no adapter for provider {provider!r} (model {model!r}); known: {known}"
                )
            self._instances[provider] = self.factories[provider]()
        return self._instances[provider]

    async def aclose(self) -> None:
        """Close the adapters' connections (bound to the event loop that is ending). The
        adapters stay: what ``prepare`` learnt holds for the whole session."""
        for adapter in self._instances.values():
            await adapter.aclose()
