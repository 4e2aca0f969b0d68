"""SameTurn (run/same_turn.py): what one turn of the event loop asks for is served together."""

from __future__ import annotations

import asyncio

import pytest

from pytest_evalmine.run.same_turn import SameTurn


def test_a_turn_is_served_at_once_and_each_gets_its_own_result_in_order() -> None:
    served: list[list[int]] = []

    def serve(items: list[int]) -> list[int]:
        served.append(items)
        return [item * 10 for item in items]

    async def main() -> list[int]:
        batch = SameTurn(serve)
        first = await asyncio.gather(*(batch.submit(i) for i in range(5)))
        later = await batch.submit(7)
        return [*first, later]

    assert asyncio.run(main()) == [0, 10, 20, 30, 40, 70]
    assert served == [[0, 1, 2, 3, 4], [7]]


def test_a_failure_reaches_every_submitter_of_the_turn() -> None:
    def serve(items: list[int]) -> list[int]:
        raise OSError("database is locked")

    async def main() -> list[object]:
        batch = SameTurn(serve)
        return await asyncio.gather(*(batch.submit(i) for i in range(3)), return_exceptions=True)

    results = asyncio.run(main())
    assert [type(result) for result in results] == [OSError] * 3


def test_the_result_of_a_cancelled_submitter_goes_to_unclaimed() -> None:
    unclaimed: list[tuple[int, int]] = []

    async def main() -> int:
        batch = SameTurn(
            lambda items: [item + 100 for item in items],
            lambda item, result: unclaimed.append((item, result)),
        )
        kept = asyncio.ensure_future(batch.submit(1))
        gone = asyncio.ensure_future(batch.submit(2))
        await asyncio.sleep(0)  # both queued
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        return await kept

    assert asyncio.run(main()) == 101
    assert unclaimed == [(2, 102)]
