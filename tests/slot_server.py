"""A loopback Chat Completions server with K slots, a queue and a fixed service time: what a
llama-server started with ``-np K`` looks like to a client. Requests beyond K wait in the
server's queue (their latency grows, as it does on a real server); a request whose client gave
up still holds its slot until served, as a server without cancellation does.

Optional misbehaviour: ``declare_slots`` answers llama.cpp's ``GET /props`` with
``total_slots``; ``burst_429`` answers 429 with a ``Retry-After`` to requests arriving while
a burst is on (the misbehaving server of a rate-limited gateway): ``(start_s, length_s)``
after the first request (benchmarks: how many calls a burst catches depends on the machine);
``refuse_posts`` answers 429 to the POSTs of those numbers (0 is the first), whatever the
clock says (tests: the same refusals on a loaded machine as on a quiet one). ``headers`` go
with every answer (a provider's rate-limit headers); ``shape="anthropic"`` answers as
Anthropic's Messages API does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .http_server import LoopbackServer, Received, Reply, running_server


def listing(owner: str) -> dict:
    return {"object": "list", "data": [{"id": "served-model", "owned_by": owner}]}


ANSWER = '{"category": "bug"}'


@dataclass
class SlotServer:
    slots: int
    service_s: float
    declare_slots: bool = False
    # 429 to the POSTs arriving from start_s to start_s + length_s after the first one.
    burst_429: tuple[float, float] | None = None
    # 429 to the POSTs of these numbers, counted from 0 in the order they arrive.
    refuse_posts: range | None = None
    retry_after_s: float = 0.2
    headers: dict[str, str] = field(default_factory=dict)
    shape: str = "openai"
    posts: int = 0
    # The most requests held at once, waiting or served (what the client had out at once).
    max_held: int = 0
    refused: int = 0
    max_waiting: int = 0
    _waiting: int = 0
    _first_post: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _slots: threading.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self._slots = threading.Semaphore(self.slots)

    def respond(self, received: Received) -> Reply:
        if received.method == "GET":
            if received.path.endswith("/props") and self.declare_slots:
                return Reply.json(200, {"total_slots": self.slots})
            if received.path.endswith("/models"):
                # llama-server's listing names it; a server that declares slots is one.
                owner = "llamacpp" if self.declare_slots else "someone"
                return Reply.json(200, listing(owner))
            return Reply.json(404, {"error": {"message": "not found"}})
        with self._lock:
            number, self.posts = self.posts, self.posts + 1
            now = time.monotonic()
            if self._first_post is None:
                self._first_post = now
            since = now - self._first_post
            burst = self.burst_429 is not None and (
                self.burst_429[0] <= since < self.burst_429[0] + self.burst_429[1]
            )
            burst = burst or (self.refuse_posts is not None and number in self.refuse_posts)
            if burst:
                self.refused += 1
            else:
                self._waiting += 1
                self.max_waiting = max(self.max_waiting, self._waiting - self.slots)
                self.max_held = max(self.max_held, self._waiting)
        if burst:
            headers = {"Retry-After": f"{self.retry_after_s:g}"}
            return Reply.json(429, {"error": {"message": "slow down"}}, headers)
        with self._slots:  # the queue: a request waits here for a free slot
            time.sleep(self.service_s)
        with self._lock:
            self._waiting -= 1
        if self.shape == "anthropic":
            return Reply.json(
                200,
                {
                    "id": f"msg_{number}",
                    "type": "message",
                    "content": [{"type": "text", "text": ANSWER}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 20, "output_tokens": 6},
                },
                dict(self.headers),
            )
        return Reply.json(
            200,
            {
                "id": f"chatcmpl-{number}",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ANSWER},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 6},
            },
            dict(self.headers),
        )


@contextmanager
def running_slot_server(server: SlotServer) -> Iterator[tuple[LoopbackServer, SlotServer]]:
    with running_server() as loopback:
        loopback.respond = server.respond
        yield loopback, server
