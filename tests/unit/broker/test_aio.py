"""The stop helpers: no cancellation is lost, and a task that runs on after
one is cancelled again (see ``broker/aio.py`` for the Python 3.11 bug)."""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker import aio
from odradek.broker.aio import cancel_and_wait, wait_event


def test_a_cancel_that_arrives_as_the_event_is_set_stops_the_loop() -> None:
    async def main() -> None:
        event = asyncio.Event()
        rounds = 0

        async def loop() -> None:
            nonlocal rounds
            while True:
                await wait_event(event, 10)
                event.clear()
                rounds += 1

        task = asyncio.create_task(loop())
        await asyncio.sleep(0)  # the loop waits on the event
        event.set()
        task.cancel()  # in the same turn: asyncio.wait_for on 3.11 drops this one
        await asyncio.wait((task,), timeout=2)
        assert task.cancelled()
        assert rounds == 0

    asyncio.run(main())


def test_wait_event_answers_whether_the_event_was_set() -> None:
    async def main() -> None:
        event = asyncio.Event()
        assert await wait_event(event, 0.01) is False
        asyncio.get_running_loop().call_later(0.01, event.set)
        assert await wait_event(event, 5) is True
        assert await wait_event(event, 0) is True

    asyncio.run(main())


def test_a_task_that_swallows_a_cancellation_is_cancelled_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aio, "RECANCEL_S", 0.01)

    async def main() -> None:
        swallowed = 0

        async def stubborn() -> None:
            nonlocal swallowed
            while True:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    if swallowed:
                        raise
                    swallowed += 1  # as wait_for does when its inner awaitable just finished

        finished = asyncio.create_task(asyncio.sleep(0))
        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait(task, None, finished), 5)
        assert task.cancelled() and swallowed == 1

    asyncio.run(main())


def test_exceptions_of_stopped_tasks_are_taken_not_raised() -> None:
    async def main() -> None:
        async def boom() -> None:
            raise RuntimeError("boom")

        task = asyncio.create_task(boom())
        await asyncio.sleep(0)
        await cancel_and_wait(task)  # already failed: nothing raised here
        assert isinstance(task.exception(), RuntimeError)

    asyncio.run(main())
