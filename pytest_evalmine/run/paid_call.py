"""The paid call (spec: "Dispatch" steps 4 to 6, "Retries"): one reserved request sent online,
at its provider's pace and under its width, retried with backoff, and its answer checked,
costed and stored.

A failure keeps its reservation when the provider may have billed it (a retry then reserves
again); a pause a provider asks for beyond ``MAX_RETRY_AFTER_S`` is not waited out; a call
still out when the Ctrl-C's grace ends is reported as possibly billed. Apart from dispatch,
which decides what is sent (cache, claims, the cap), so that what one send costs and how it
is retried reads in one place.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from ..adapters.base import AdapterError, RateLimit, Request, Response, tokens_for_chars
from ..redaction import redact
from .concurrency import Attempt, ConcurrencyLimiter, Gate, is_overload
from .interrupts import InFlightCalls
from .outcome import CAP_REFUSED_RETRY, ERROR, OK, Outcome, cut_off_outcome
from .planned import Planned
from .same_turn import SameTurn
from .store import PaidAnswer, StoreBackend

# Slack over the model's own limit so the adapter's timeout fires first with its own message.
TIMEOUT_SLACK_S = 5.0
# A provider asking for a longer pause (a daily quota, say) will not recover within a run.
MAX_RETRY_AFTER_S = 120.0


@dataclass
class TryCounts:
    """A call's tries that reached a server, and those that may be billed (sent, then
    lost): what report.json's ``calls.made`` and the possibly billed line count."""

    sent: int = 0
    billed: int = 0

    def answered(self) -> TryCounts:
        """The counts once the last try brought an answer (it reached the server)."""
        return TryCounts(self.sent + 1, self.billed)


@dataclass
class PaidCalls:
    """One batch's online calls. ``limiters`` and ``gates``: the dispatcher's per provider
    (its widths); ``pacers``: per provider with a requests-per-minute limit; ``reserve``:
    the cap's reservation for a retry (``Reservations.reserve``); ``interrupted``: whether
    the run was stopped (nothing is retried after it)."""

    store: StoreBackend
    retries: int
    backoff_s: float
    pacers: dict[str, Pacer]
    limiters: dict[str, ConcurrencyLimiter]
    gates: dict[str, Gate]
    in_flight: InFlightCalls
    interrupted: Callable[[], bool]
    reserve: Callable[..., Coroutine[Any, Any, int | None]]
    _answers: SameTurn[PaidAnswer, None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._answers = SameTurn(self._record_paid_answers)

    async def call(self, item: Planned, reservation: int) -> Outcome:
        """Send ``item`` (reserved as ``reservation``) until it is answered or gives up."""
        attempts = 0
        possibly_billed = 0.0
        # Counted as the report counts them: a try that never connected was not made.
        tries = TryCounts()
        while True:
            attempts += 1
            pacer = self.pacers.get(item.adapter.name)
            if pacer is not None:
                await pacer.wait()
            limiter = self.limiters[item.adapter.name]
            sent = limiter.attempt()
            started = asyncio.get_running_loop().time()
            try:
                response = await self._send_counted(item, limiter, sent)
            except asyncio.CancelledError:
                if not self.in_flight.grace_over:
                    raise
                # Sent before the Ctrl-C and still out when the grace ended: it may be billed.
                self.store.keep_as_possibly_billed(reservation)
                return cut_off_outcome(
                    item.key,
                    attempts=attempts,
                    possibly_billed_usd=possibly_billed + item.max_cost_usd,
                    sent_tries=tries.sent + 1,
                    billed_tries=tries.billed + 1,
                )
            except (AdapterError, asyncio.TimeoutError) as exc:
                error = exc if isinstance(exc, AdapterError) else _timeout_error(item.request)
                if is_overload(error.kind, error.status):
                    limiter.overloaded(sent)
                _size(limiter, error.rate_limit, item.request)
                if error.retryable and (error.retry_after_s or 0) > MAX_RETRY_AFTER_S:
                    error = AdapterError(
                        error.kind,
                        f"{error} (the provider asked to wait {error.retry_after_s:.0f} s, more "
                        f"than the {MAX_RETRY_AFTER_S:.0f} s a run waits)",
                        retryable=False,
                        status=error.status,
                        possibly_billed=error.possibly_billed,
                    )
                tries.sent += error.reached_server
                retry = error.retryable and attempts <= self.retries
                note = ""
                if retry and self.interrupted():
                    retry, note = False, "; not retried: interrupted (Ctrl-C)"
                if error.may_have_been_billed:
                    # Sent, then lost: the provider may bill it, so its worst case stays
                    # committed; a retry needs a reservation of its own.
                    self.store.keep_as_possibly_billed(reservation)
                    possibly_billed += item.max_cost_usd
                    tries.billed += 1
                    if retry:
                        again = await self.reserve(item, holding=True)
                        if again is None and self.interrupted():
                            retry, note = False, "; not retried: interrupted (Ctrl-C)"
                        elif again is None:
                            retry = False
                            note = f"; {CAP_REFUSED_RETRY}"
                        else:
                            reservation = again
                if retry:
                    await asyncio.sleep(self._backoff(attempts, error.retry_after_s))
                    continue
                if not error.may_have_been_billed:
                    self.store.release(reservation)
                return Outcome(
                    item.key,
                    ERROR,
                    error=f"{error.kind}: {error} (after {attempts} attempt(s)){note}",
                    error_kind=error.kind,
                    attempts=attempts,
                    possibly_billed_usd=possibly_billed,
                    sent_tries=tries.sent,
                    billed_tries=tries.billed,
                )
            except Exception as exc:  # an adapter bug must not lose the run
                self.store.release(reservation)
                return Outcome(
                    item.key,
                    ERROR,
                    # Not an AdapterError, so nothing has redacted its text yet.
                    error=redact(f"adapter_crash: {type(exc).__name__}: {exc}"),
                    error_kind="adapter_crash",
                    attempts=attempts,
                    possibly_billed_usd=possibly_billed,
                    sent_tries=tries.sent + 1,  # unknown: counted as sent
                    billed_tries=tries.billed,
                )
            # From the send to the answer, the server's own queue included: the signal of
            # a width the server cannot serve at once.
            limiter.answered(sent, asyncio.get_running_loop().time() - started)
            _size(limiter, response.rate_limit, item.request)
            self.gates[item.adapter.name].wake()
            # The width it was sent at, kept with the answer: the scorecard's latency is taken
            # from answers sent within the capacity the provider was found to have.
            response = dataclasses.replace(response, width=sent.width, rate_limit=None)
            return await self.paid(
                item, response, reservation, attempts, possibly_billed, tries=tries.answered()
            )

    async def paid(
        self,
        item: Planned,
        response: Response,
        reservation: int,
        attempts: int,
        possibly_billed: float,
        *,
        tries: TryCounts | None = None,
    ) -> Outcome:
        """An answer that arrived (online or in a batch): checked, costed and stored.
        ``tries``: counted online; a batch's are not (the report then assumes each try
        reached the provider)."""
        # Redacted before anything keeps it: the cache, and every report built from it.
        response = redacted_response(response)
        usage = item.checked_usage(response.usage, response.text)
        if usage is not response.usage:
            response = dataclasses.replace(response, usage=usage)
        cost = item.price.cost(usage)
        await self._keep(
            PaidAnswer(
                key=item.key,
                provider=item.adapter.name,
                model=item.request.model,
                response=response,
                cost_usd=cost,
                reservation=reservation,
                attempts=attempts,
                possibly_billed_usd=possibly_billed,
            )
        )
        return Outcome(
            item.key,
            OK,
            response,
            cost_usd=cost,
            cost_if_uncached_usd=cost,
            attempts=attempts,
            possibly_billed_usd=possibly_billed,
            sent_tries=tries.sent if tries else None,
            billed_tries=tries.billed if tries else None,
        )

    async def _keep(self, answer: PaidAnswer) -> None:
        """Store ``answer`` durably; returns once it is committed. Answers that arrive in the
        same turn of the event loop share one transaction."""
        await self._answers.submit(answer)

    def _record_paid_answers(self, answers: list[PaidAnswer]) -> list[None]:
        self.store.record_paid_answers(answers)
        return [None] * len(answers)

    async def _send_counted(
        self, item: Planned, limiter: ConcurrencyLimiter, sent: Attempt
    ) -> Response:
        try:
            return await self._send(item)
        finally:
            limiter.returned(sent)

    async def _send(self, item: Planned) -> Response:
        """The adapter call, tracked so that the end of the Ctrl-C grace can cancel it."""
        return await self.in_flight.track(
            asyncio.wait_for(
                item.adapter.complete(item.request),
                timeout=item.request.timeout_s + TIMEOUT_SLACK_S,
            )
        )

    def _backoff(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return retry_after_s
        return min(20.0, self.backoff_s * 2 ** (attempt - 1)) * (1 + random.random() / 4)


class Pacer:
    """Spaces the starts of one provider's calls (retries included) by ``interval_s``."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.next_start = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self.lock:
            loop = asyncio.get_running_loop()
            delay = self.next_start - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.next_start = loop.time() + self.interval_s


def redacted_response(response: Response) -> Response:
    """``response`` with every loaded key and key-shaped string redacted from the texts a
    provider chose (answer, request id, finish reason)."""
    request_id = response.provider_request_id
    return dataclasses.replace(
        response,
        text=redact(response.text),
        provider_request_id=None if request_id is None else redact(request_id),
        finish_reason=redact(response.finish_reason),
    )


def _size(limiter: ConcurrencyLimiter, rate_limit: RateLimit | None, request: Request) -> None:
    """Bound the width by what the reply's rate-limit headers say the provider still takes;
    a call is counted at its prompt's estimated tokens plus its ``max_tokens``."""
    if rate_limit is not None:
        tokens = tokens_for_chars(len(request.system or "") + len(request.prompt))
        limiter.sized(
            rate_limit.remaining_requests,
            rate_limit.remaining_tokens,
            tokens + request.max_tokens,
        )


def _timeout_error(request: Request) -> AdapterError:
    return AdapterError(
        "timeout",
        f"no answer within {math.ceil(request.timeout_s + TIMEOUT_SLACK_S)} s",
        retryable=True,
    )
