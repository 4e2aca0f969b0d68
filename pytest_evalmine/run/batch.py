"""Provider batches (spec: "Batch"): a run's uncached calls sent as provider batch jobs at
the batch price, with the cache, the cap and the claims of online calls.

Dispatch (``dispatch.py``) claims and reserves every call exactly as it does for an online
one; a call whose provider is batched then waits here for its result instead of being sent.
The calls that arrive together are grouped per provider, split under the provider's limits,
written to the store (custom id -> cache key) and only then submitted; each batch is polled
until it ends and its results are handed back to dispatch, which stores each answer as it
is read. A call already in a batch the store knows (an earlier run killed while polling, or
one that stopped waiting) is not sent again: that batch is polled instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..adapters.base import Adapter, AdapterError
from ..adapters.batch_wire import (
    BATCH_CANCELED,
    BATCH_ERRORED,
    BATCH_EXPIRED,
    BATCH_FAILED,
    NO_RESULT,
    BatchStatus,
    BatchWire,
    ItemResult,
    split_entries,
)
from ..errors import EvalmineError
from .outcome import BUDGET, ERROR, IN_BATCH, Outcome
from .planned import Planned
from .run_state import RunState
from .store import BatchedItem, StoreBackend

# Providers batched by ``--evalmine-batch`` without a list: the ones with a batch API here.
DEFAULT_PROVIDERS = ("openai", "anthropic", "google")
DEFAULT_POLL_S = 30.0
# A non-TTY log gets a batch's progress line at most this often (a TTY line at every poll).
LOG_EVERY_S = 30.0
# How long calls arriving together are gathered before their batch is sent: dispatch
# reserves and claims a wave of calls over a few turns of the loop.
GATHER_S = 0.05
# The server has no batch API (an OpenAI-compatible endpoint without /v1/batches answers
# 404): its calls go online, at the online price, whatever ``fallback`` says.
NO_BATCH_API = "batch_unsupported"
# The provider refused the batch before accepting it: nothing was billed.
NOT_SUBMITTED = "batch_not_submitted"
# Statuses of a refused submission that say the server has no batch API at all.
_NO_API_STATUSES = frozenset({404, 405, 501})
# Failures (of polls, of reading results) in a row before a batch's calls are given up;
# a restarting server fails a few polls and is then polled again.
MAX_POLL_FAILURES = 20
# Kinds of a request's failure for which the provider has billed nothing: released.
_UNBILLED = frozenset(
    {BATCH_ERRORED, BATCH_EXPIRED, BATCH_CANCELED, BATCH_FAILED, NOT_SUBMITTED, NO_BATCH_API}
)


@dataclass(frozen=True)
class BatchSettings:
    """``--evalmine-batch[=PROVIDERS][,fallback=online][,poll=SECONDS]`` and
    ``--evalmine-batch-wait=DURATION``."""

    providers: frozenset[str] = frozenset(DEFAULT_PROVIDERS)
    fallback_online: bool = False
    poll_s: float = DEFAULT_POLL_S
    wait_s: float | None = None


def parse_batch(spec: str | None, wait: str | None = None) -> BatchSettings | None:
    """The settings, or None when batching is off (no ``--evalmine-batch``)."""
    if not spec or spec == "off":
        if wait:
            raise EvalmineError("--evalmine-batch-wait: only with --evalmine-batch")
        return None
    providers: set[str] = set()
    fallback, poll_s = False, DEFAULT_POLL_S
    for part in (p.strip() for p in spec.split(",")):
        key, sep, value = part.partition("=")
        if not sep and key in ("on", "all", "true"):
            providers.update(DEFAULT_PROVIDERS)
        elif not sep and re.fullmatch(r"[A-Za-z0-9_.-]+", key):
            providers.add(key)
        elif key == "fallback" and value in ("online", "error"):
            fallback = value == "online"
        elif key == "poll":
            poll_s = parse_duration(value, f"--evalmine-batch={spec}: poll")
        else:
            raise EvalmineError(
                f"--evalmine-batch={spec}: cannot read {part!r} (on, PROVIDER, "
                "fallback=online|error, poll=DURATION)"
            )
    return BatchSettings(
        providers=frozenset(providers or DEFAULT_PROVIDERS),
        fallback_online=fallback,
        poll_s=poll_s,
        wait_s=parse_duration(wait, "--evalmine-batch-wait") if wait else None,
    )


def parse_duration(text: str, what: str) -> float:
    """``90``, ``90s``, ``30m``, ``2h``, ``1h30m`` -> seconds."""
    spelled = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", spelled):
        return float(spelled)
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", spelled)
    if not spelled or parts is None:
        raise EvalmineError(f"{what}: {text!r} is not a duration (90s, 30m, 2h, 1h30m)")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in parts.groups())
    return hours * 3600 + minutes * 60 + seconds


def wire_for(adapter: Adapter, settings: BatchSettings) -> BatchWire | None:
    """The batch API of ``adapter`` when its provider is batched: OpenAI's own (or an
    OpenAI-compatible endpoint named in the option, whose server has ``/v1/batches``),
    Anthropic, Gemini, or an adapter of yours with a ``batch_wire()``; None otherwise (the
    call goes online)."""
    if adapter.name not in settings.providers:
        return None
    own = getattr(adapter, "batch_wire", None)
    if callable(own):
        return own()
    from ..adapters.anthropic import AnthropicAdapter
    from ..adapters.gemini import GeminiAdapter
    from ..adapters.openai import OpenAIAdapter

    if isinstance(adapter, OpenAIAdapter):
        from ..adapters.batch_openai import OpenAIBatch

        return OpenAIBatch(adapter)
    if isinstance(adapter, AnthropicAdapter):
        from ..adapters.batch_anthropic import AnthropicBatch

        return AnthropicBatch(adapter)
    if isinstance(adapter, GeminiAdapter):
        from ..adapters.batch_gemini import GeminiBatch

        return GeminiBatch(adapter)
    return None


@dataclass
class BatchSession:
    """What the session's batches did, for every dispatcher of the run (answers, judge):
    the report's ``batches`` and the progress lines."""

    settings: BatchSettings
    # Writes one progress line (the glue rewrites it in place on a TTY).
    say: Callable[[str], None] | None = None
    tty: bool = False
    clock: Callable[[], float] = time.monotonic
    started: float | None = None
    # provider -> {"batched": answers that came by batch, "online": calls sent online}
    calls: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    # batch id -> calls of this run still in it when the run stopped waiting
    waiting: dict[str, int] = field(default_factory=dict)
    _wires: dict[int, BatchWire | None] = field(default_factory=dict)
    # Wires (by id) whose server turned out to have no batch API: planned online from then on.
    unsupported: set[int] = field(default_factory=set)
    _last_line: dict[str, float] = field(default_factory=dict)
    # What went wrong after the answers were stored (a file OpenAI kept): the report's.
    warnings: list[str] = field(default_factory=list)

    def wire(self, adapter: Adapter) -> BatchWire | None:
        if id(adapter) not in self._wires:
            self._wires[id(adapter)] = wire_for(adapter, self.settings)
        return self._wires[id(adapter)]

    def takes(self, adapter: Adapter) -> bool:
        """Whether calls of ``adapter`` are planned as batched (at the batch price)."""
        wire = self.wire(adapter)
        return wire is not None and id(wire) not in self.unsupported

    def count(self, provider: str, way: str) -> None:
        counts = self.calls.setdefault(provider, {"batched": 0, "online": 0})
        counts[way] = counts.get(way, 0) + 1

    def deadline(self) -> float | None:
        if self.settings.wait_s is None or self.started is None:
            return None
        return self.started + self.settings.wait_s

    def progress(self, batch: _Tracked, status: BatchStatus | None, *, final: bool) -> None:
        """A line per batch: on a TTY at every poll, in a log every ``LOG_EVERY_S``."""
        now = self.clock()
        entry = self.batches[batch.batch_id]
        if status is not None:
            entry["state"], entry["counts"] = status.state, dict(status.counts)
        if self.say is None:
            return
        last = self._last_line.get(batch.batch_id)
        if not (final or self.tty or last is None or now - last >= LOG_EVERY_S):
            return
        self._last_line[batch.batch_id] = now
        counts = ", ".join(f"{k} {v}" for k, v in sorted(entry.get("counts", {}).items()))
        resumed = ", resumed" if entry.get("resumed") else ""
        self.say(
            f"evalmine: batch {batch.provider} {batch.batch_id}: {entry['requests']} calls"
            f"{resumed}, {entry.get('state') or 'submitted'}"
            f"{f' ({counts})' if counts else ''}, {_elapsed(now - batch.started)}"
        )

    def to_json(self) -> dict[str, Any]:
        """report.json ``batches``."""
        return {
            "calls": {provider: dict(counts) for provider, counts in sorted(self.calls.items())},
            "batches": list(self.batches.values()),
            "waiting": [
                {"batch_id": batch_id, "calls": calls}
                for batch_id, calls in sorted(self.waiting.items())
            ],
            "waited_s": round(self.clock() - self.started, 3) if self.started else 0.0,
            "warnings": list(self.warnings),
        }


@dataclass
class _Tracked:
    """A batch this run waits for: its calls by custom id, and who waits for each."""

    provider: str
    wire: BatchWire
    local_id: str
    batch_id: str
    items: dict[str, Planned]
    started: float
    # Every request the batch holds is among ``items`` (else it stays open once read).
    complete: bool = True
    waiters: dict[str, asyncio.Future[ItemResult]] = field(default_factory=dict)
    unhandled: set[str] = field(default_factory=set)
    ended: bool = False
    # The poll that saw it end: what it left on the provider (``cleanup``).
    status: BatchStatus | None = None


class Batcher:
    """One dispatch's batches: gathers its calls, submits or resumes, polls, hands back."""

    def __init__(
        self,
        session: BatchSession,
        store: StoreBackend,
        run_token: str,
        owner: str,
        state: RunState,
    ) -> None:
        self.session = session
        self.store = store
        self.run_token = run_token
        self.owner = owner
        self.state = state
        self._pending: list[tuple[Planned, asyncio.Future[ItemResult]]] = []
        self._gathering: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._cleanups: set[asyncio.Task[None]] = set()
        self._where: dict[str, _Tracked] = {}

    def takes(self, item: Planned) -> bool:
        """Whether ``item`` waits here: every call of a batched provider, also once its
        server proved to have no batch API (it is then handed back at once, to go online)."""
        return self.session.wire(item.adapter) is not None

    async def result(self, item: Planned) -> ItemResult:
        """The call's result once its batch ended (or it stopped waiting: ``IN_BATCH``)."""
        future: asyncio.Future[ItemResult] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        self.state.batch_queue(1)
        if self._gathering is None or self._gathering.done():
            self._gathering = asyncio.ensure_future(self._gather())
        return await future

    def interrupted(self) -> bool:
        return self.state.interrupted

    def handled(self, item: Planned) -> None:
        """Dispatch has stored the call's answer (or settled its failure)."""
        tracked = self._where.pop(item.key, None)
        if tracked is None:
            return
        tracked.unhandled.discard(item.key)
        if tracked.ended and not tracked.unhandled and tracked.complete:
            self.store.batch_collected(tracked.local_id)
            if getattr(tracked.wire, "cleanup", None) is not None:
                task = asyncio.ensure_future(self._clean_up(tracked))
                self._cleanups.add(task)
                task.add_done_callback(self._cleanups.discard)

    async def _clean_up(self, tracked: _Tracked) -> None:
        """What a collected batch left on the provider (OpenAI's files), deleted; whatever
        goes wrong is a warning of the report, never an error: every answer is stored."""
        assert tracked.status is not None
        try:
            warnings = await tracked.wire.cleanup(tracked.batch_id, tracked.status)  # type: ignore[attr-defined]
        except Exception as exc:
            warnings = [f"batch {tracked.batch_id}: could not clean up ({exc!r})"]
        self.session.warnings += warnings

    async def finish(self) -> None:
        """Wait for the collected batches' clean-ups (each bounded by its timeout); after a
        Ctrl-C they are dropped, the files named in a warning: nothing delays the stop."""
        while self._cleanups:
            if self.interrupted():
                for task in list(self._cleanups):
                    task.cancel()
                self.session.warnings.append(
                    "interrupted (Ctrl-C) before the files of collected batches were all "
                    "deleted; `evalmine batches --all` lists the batches"
                )
                return
            await asyncio.wait(list(self._cleanups), timeout=0.1)

    async def _gather(self) -> None:
        """Send what is queued, gathered over a few turns of the loop, until the queue stays
        empty: calls queued while a wave is being submitted (a provider's create may take
        seconds) are sent by this same task, so none is left behind a gatherer that ended."""
        while self._pending:
            seen = -1
            while len(self._pending) != seen:
                seen = len(self._pending)
                await asyncio.sleep(GATHER_S)
            pending, self._pending = self._pending, []
            try:
                await self._send(pending)
            except Exception as exc:  # never leave a call waiting for ever
                for _item, future in pending:
                    if not future.done():
                        future.set_result(ItemResult("", error_kind="batch_crash", error=repr(exc)))
            finally:
                self.state.batch_queue(-len(pending))

    async def _send(self, pending: list[tuple[Planned, asyncio.Future[ItemResult]]]) -> None:
        waiting = {item.key: future for item, future in pending}
        items = {item.key: item for item, _ in pending}
        await self._confirm_unconfirmed(items, waiting)
        # Calls already in a batch the provider accepted: that batch is polled again.
        resumed: dict[str, list[tuple[BatchedItem, Planned]]] = {}
        for key, batched in self.store.open_batch_items(list(items)).items():
            resumed.setdefault(batched.local_id, []).append((batched, items.pop(key)))
        sizes = {b["local_id"]: b["requests"] for b in self.store.batches()} if resumed else {}
        for local_id, members in resumed.items():
            first = members[0][0]
            wire = self.session.wire(members[0][1].adapter)
            assert wire is not None
            in_batch = {batched.custom_id: item for batched, item in members}
            total = sizes.get(local_id, len(in_batch))
            self._follow(
                wire, local_id, first.batch_id, in_batch, waiting, resumed=True,
                complete=total == len(in_batch),
            )  # fmt: skip
        by_wire: dict[tuple[int, str], tuple[BatchWire, str, list[Planned]]] = {}
        for item in items.values():
            wire = self.session.wire(item.adapter)
            assert wire is not None
            grouping = getattr(wire, "group", None)
            group = grouping(item.request) if grouping is not None else ""
            by_wire.setdefault((id(wire), group), (wire, group, []))[2].append(item)
        submits = []
        for wire, group, planned in by_wire.values():
            if id(wire) in self.session.unsupported:
                for item in planned:
                    gone = ItemResult(item.key, error_kind=NO_BATCH_API, error="no batch API")
                    _settle(waiting.pop(item.key), gone)
                continue
            keyed = {item.key: item for item in planned}
            entries = [(item.key, wire.entry(item.key, item.request)) for item in planned]
            for chunk in split_entries(entries, wire.max_requests, wire.max_bytes, 256):
                submits.append(self._submit(wire, group, chunk, keyed, waiting))
        # Every provider's batches at once: one provider's slow create holds back no other.
        failures = [
            failed
            for failed in await asyncio.gather(*submits, return_exceptions=True)
            if isinstance(failed, BaseException)
        ]
        if failures:
            raise failures[0]

    async def _confirm_unconfirmed(
        self, items: dict[str, Planned], waiting: dict[str, asyncio.Future[ItemResult]]
    ) -> None:
        """A batch left ``submitting`` (its process died between the POST and storing the
        id) may have been accepted: a wire that can ``find`` it by our label makes it
        ``submitted`` (then polled like any other); not found, it is forgotten and its calls
        are sent anew; when the look-up fails, its calls wait for a rerun rather than risk
        paying twice. A wire without ``find`` (Anthropic's batches carry no label) sends
        them anew."""
        for local_id, (_provider, keys) in self.store.unconfirmed_batches(list(items)).items():
            wire = self.session.wire(items[keys[0]].adapter)
            find = getattr(wire, "find", None)
            if find is None:
                self.store.batch_forgotten(local_id)
                continue
            try:
                batch_id = await find(local_id)
            except AdapterError as exc:
                reason = (
                    f"could not learn whether batch {local_id} was accepted ({exc.kind}: "
                    f"{exc}); rerun to collect it"
                )
                for key in keys:
                    items.pop(key)
                    failed = ItemResult(key, error_kind=IN_BATCH, error=reason)
                    _settle(waiting.pop(key), failed)
                continue
            if batch_id is None:
                self.store.batch_forgotten(local_id)
            else:
                self.store.batch_submitted(local_id, batch_id)

    async def _submit(
        self,
        wire: BatchWire,
        group: str,
        chunk: list[tuple[str, bytes]],
        items: dict[str, Planned],
        waiting: dict[str, asyncio.Future[ItemResult]],
    ) -> None:
        local_id = f"em-{uuid.uuid4().hex[:16]}"
        # Durable before the provider hears of it: a run killed after the POST finds it.
        self.store.begin_batch(
            local_id, wire.provider, self.run_token, self.owner, [(c, c) for c, _ in chunk]
        )
        try:
            batch_id = await wire.submit([entry for _, entry in chunk], local_id, group)
        except AdapterError as exc:
            # Refused before it was accepted: nothing billed, nothing to poll. Lost on the
            # way back: the provider may hold it; its row stays, for ``evalmine batches``.
            billed = exc.may_have_been_billed
            if not billed:
                self.store.batch_forgotten(local_id)
            kind = "batch_submit_lost" if billed else NOT_SUBMITTED
            if not billed and exc.status in _NO_API_STATUSES:
                kind = NO_BATCH_API
                self.session.unsupported.add(id(wire))
            reason = f"the batch of {len(chunk)} call(s) was not accepted: {exc.kind}: {exc}"
            for custom_id, _ in chunk:
                failed = ItemResult(custom_id, error_kind=kind, error=reason)
                _settle(waiting.pop(custom_id), failed)
            return
        self.store.batch_submitted(local_id, batch_id)
        in_batch = {custom_id: items[custom_id] for custom_id, _ in chunk}
        self._follow(wire, local_id, batch_id, in_batch, waiting, resumed=False, complete=True)

    def _follow(
        self,
        wire: BatchWire,
        local_id: str,
        batch_id: str,
        items: dict[str, Planned],
        waiting: dict[str, asyncio.Future[ItemResult]],
        *,
        resumed: bool,
        complete: bool,
    ) -> None:
        now = self.session.clock()
        if self.session.started is None:
            self.session.started = now
        tracked = _Tracked(
            wire.provider, wire, local_id, batch_id, items, now, complete=complete,
            waiters={c: waiting.pop(c) for c in items}, unhandled=set(items),
        )  # fmt: skip
        for key in items:
            self._where[key] = tracked
        self.session.batches[batch_id] = {
            "batch_id": batch_id,
            "provider": wire.provider,
            "requests": len(items),
            "resumed": resumed,
            "state": None,
            "counts": {},
        }
        self.session.progress(tracked, None, final=True)
        task = asyncio.ensure_future(self._poll_guarded(tracked))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _poll_guarded(self, tracked: _Tracked) -> None:
        """``_poll``; a bug in reading a batch (a wire's, or ours) never leaves its calls
        waiting for ever: they end still in the batch, for a rerun to collect."""
        try:
            await self._poll(tracked)
        except Exception as exc:
            reason = f"batch {tracked.batch_id} could not be read ({exc!r}); rerun to collect it"
            self._give_up(tracked, IN_BATCH, reason)

    async def _poll(self, tracked: _Tracked) -> None:
        failures = 0
        last_error = ""
        while True:
            if await self._stop_waiting(tracked):
                return
            try:
                status = await tracked.wire.poll(tracked.batch_id)
                self.store.batch_polled(tracked.local_id, status.state, status.counts)
                self.session.progress(tracked, status, final=status.ended)
                if status.ended:
                    tracked.status = status
                    elapsed = self.session.clock() - tracked.started
                    requests = {c: item.request for c, item in tracked.items.items()}
                    results = await tracked.wire.results(
                        tracked.batch_id,
                        status,
                        requests,
                        elapsed,
                        self.store.batch_order(tracked.local_id),
                    )
                    self._hand_back(tracked, results)
                    return
                failures = 0
            except AdapterError as exc:
                failures += 1
                last_error = f"{exc.kind}: {exc}"
                if failures >= MAX_POLL_FAILURES:
                    reason = f"batch {tracked.batch_id} could not be read: {last_error}"
                    self._give_up(tracked, IN_BATCH, f"{reason}; rerun to collect it")
                    return
            await self._sleep(self.session.settings.poll_s, tracked)

    async def _sleep(self, seconds: float, tracked: _Tracked) -> None:
        """Sleep in short steps, so a Ctrl-C or the wait bound is seen at once."""
        end = self.session.clock() + seconds
        while (left := end - self.session.clock()) > 0:
            await asyncio.sleep(min(left, 0.1))
            if self.interrupted() or self._past_deadline():
                return

    def _past_deadline(self) -> bool:
        deadline = self.session.deadline()
        return deadline is not None and self.session.clock() >= deadline

    async def _stop_waiting(self, tracked: _Tracked) -> bool:
        if not (self.interrupted() or self._past_deadline()):
            return False
        why = "interrupted (Ctrl-C)" if self.interrupted() else "the batch wait ended"
        left = sum(1 for future in tracked.waiters.values() if not future.done())
        self.session.waiting[tracked.batch_id] = left
        self._give_up(
            tracked, IN_BATCH, f"{why}: still in batch {tracked.batch_id}; rerun to collect it"
        )
        return True

    def _give_up(self, tracked: _Tracked, kind: str, reason: str) -> None:
        for custom_id, future in tracked.waiters.items():
            _settle(future, ItemResult(custom_id, error_kind=kind, error=reason))

    def _hand_back(self, tracked: _Tracked, results: list[ItemResult]) -> None:
        tracked.ended = True
        unreadable = [r.error for r in results if not r.custom_id and r.error]
        for result in results:
            future = tracked.waiters.get(result.custom_id)
            if future is not None and not future.done():  # a repeated line: the first
                future.set_result(result)
        note = f" ({'; '.join(unreadable)} in its results)" if unreadable else ""
        for custom_id, future in tracked.waiters.items():
            _settle(
                future,
                ItemResult(
                    custom_id,
                    error_kind=NO_RESULT,
                    error=f"batch {tracked.batch_id} ended without a result for it{note}",
                ),
            )


def _settle(future: asyncio.Future[ItemResult], result: ItemResult) -> None:
    if not future.done():
        future.set_result(result)


def _elapsed(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


async def batched_call(
    dispatcher: Any,
    batcher: Batcher,
    item: Planned,
    reservation: int,
    *,
    collecting: bool = False,
) -> Outcome:
    """The call ``item`` (reserved as ``reservation``) through its provider's batch: its
    answer costed and stored as an online answer is; a request the batch did not answer an
    error with the provider's reason, or (``fallback=online``) sent online at the online
    price; a call still in the batch when the run stops waiting an error that a rerun
    collects. ``dispatcher``: the ``Dispatcher`` whose call this is (not imported here:
    dispatch imports this module), for its ledger, its online call and its widths.
    ``collecting``: the call sits in a batch an earlier run submitted and ``reservation`` is
    that run's ledger row: its answer settles that row, and this run reports it as costing
    nothing new (its cost if uncached is still the answer's)."""
    try:
        result = await batcher.result(item)
        name = item.adapter.name
        if result.response is not None:
            batcher.session.count(name, "batched")
            paid = await dispatcher._online.paid(item, result.response, reservation, 1, 0.0)
            return dataclasses.replace(paid, cost_usd=0.0) if collecting else paid
        where = batcher._where.get(item.key)
        in_batch = f" (batch {where.batch_id})" if where is not None else ""
        # What this run's cap counts for a call the provider may bill: none of a call an
        # earlier run submitted (that run's ledger keeps it).
        worst = 0.0 if collecting else item.max_cost_usd
        if result.error_kind == IN_BATCH:
            # Submitted: the provider will bill it whether or not this run reads it.
            dispatcher.store.keep_as_possibly_billed(reservation)
            return Outcome(
                item.key,
                ERROR,
                error=f"{IN_BATCH}: {result.error}",
                error_kind=IN_BATCH,
                attempts=1,
                possibly_billed_usd=worst,
            )
        reason = f"{result.error_kind}: {result.error}{in_batch}"
        billed = result.error_kind not in _UNBILLED
        if billed:
            dispatcher.store.keep_as_possibly_billed(reservation)
        else:
            dispatcher.store.release(reservation)
        online_anyway = result.error_kind == NO_BATCH_API  # as a provider without one runs
        if not (batcher.session.settings.fallback_online or online_anyway) or (
            dispatcher.interrupted
        ):
            return Outcome(
                item.key,
                ERROR,
                error=reason,
                error_kind=result.error_kind,
                attempts=1,
                possibly_billed_usd=worst if billed else 0.0,
            )
        online = dataclasses.replace(item, price=dispatcher.price_for(item.request.model))
        if collecting:  # this run's first reservation for the call: settled here
            return await dispatcher._call_within_budget(online, _online_retry(dispatcher, batcher))
        again = await dispatcher._reserve(online, holding=True)
        if again is None:
            return Outcome(
                item.key,
                BUDGET,
                error=f"{reason}; not retried online: the cost cap has no room for it",
                error_kind=BUDGET,
                attempts=1,
            )
        batcher.session.count(name, "online")
        async with dispatcher._gates[name]:
            outcome = await dispatcher._call(online, again)
        if online_anyway:
            return outcome  # never sent by batch: its one try is the online one
        return dataclasses.replace(outcome, attempts=outcome.attempts + 1)
    finally:
        batcher.handled(item)


def _online_retry(dispatcher: Any, batcher: Batcher) -> Callable[[Planned, int], Any]:
    """The online try of a collected call the batch did not answer, counted as its second."""

    async def send(online: Planned, reservation: int) -> Outcome:
        name = online.adapter.name
        batcher.session.count(name, "online")
        async with dispatcher._gates[name]:
            outcome = await dispatcher._call(online, reservation)
        return dataclasses.replace(outcome, attempts=outcome.attempts + 1)

    return send
