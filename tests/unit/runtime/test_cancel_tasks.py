"""A shell's background tasks: a stopping shell's end, even one whose code turns its cancel into an error and goes
on; a serving shell whose task ended reports it."""

from __future__ import annotations

import asyncio

from forethought.rpc.server import cancel_tasks, ended_task


async def retrying_loop(cancels_seen: list[int]) -> None:
    """A background loop around a client call that reports a cancel as an error of its own, as some client
    libraries do, and a loop that logs errors and retries."""
    while True:
        try:
            try:
                await asyncio.sleep(0.2)  # the client call under way when the stop comes
            except asyncio.CancelledError:
                cancels_seen.append(1)
                raise ConnectionError("connection closed") from None
        except Exception:
            pass
        await asyncio.sleep(1.0)


async def test_a_task_that_turns_its_cancel_into_an_error_is_cancelled_again_and_ends():
    cancels_seen: list[int] = []
    task = asyncio.create_task(retrying_loop(cancels_seen))
    await asyncio.sleep(0.05)  # inside the client call
    await asyncio.wait_for(cancel_tasks([task]), 5)
    assert task.cancelled()
    assert cancels_seen == [1]  # the first cancel was swallowed; the second ended the task


async def test_tasks_that_end_on_their_cancel_or_had_failed_stop_at_once():
    async def failed() -> None:
        raise RuntimeError("failed before the stop")

    async def sleeping() -> None:
        await asyncio.sleep(60)

    tasks = [asyncio.create_task(failed()), asyncio.create_task(sleeping())]
    await asyncio.sleep(0)
    await cancel_tasks(tasks)
    assert isinstance(tasks[0].exception(), RuntimeError) and tasks[1].cancelled()


async def test_a_shell_fails_when_one_of_its_background_tasks_ends() -> None:
    async def forever() -> None:
        await asyncio.Event().wait()

    async def broken() -> None:
        raise ConnectionError("redis went away")

    running = asyncio.create_task(forever(), name="heartbeats")
    assert ended_task([running]) is None
    failing = asyncio.create_task(broken(), name="placement-loop")
    returned = asyncio.create_task(asyncio.sleep(0), name="reader")
    await asyncio.sleep(0.01)
    assert ended_task([running, failing]) == "its task placement-loop ended: ConnectionError: redis went away"
    assert ended_task([running, returned]) == "its task reader ended"
    await cancel_tasks([running, failing, returned])
