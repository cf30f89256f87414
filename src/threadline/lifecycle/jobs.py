"""Jobs: work that takes several transactions (a sweep, reclaiming space), written once.

A job is a generator yielding ``(operation, write)`` steps — each operation a sans-IO
``storage.ops`` generator run in its own transaction — and sent each step's result;
an exception raised by a step is thrown into the job at that step, which may catch it
and go on. ``run_job`` drives a job on a sync saver, ``arun_job`` on an async one.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, TypeVar

from threadline.storage.ops import Op

T = TypeVar("T")
Job = Generator[tuple[Op[Any], bool], Any, T]


def run_job(saver: Any, job: Job[T]) -> T:
    """Run ``job`` to its end on ``saver`` (``saver.run`` per step); its return value."""
    try:
        op, write = next(job)
        while True:
            try:
                result = saver.run(op, write=write)
            except Exception as exc:
                op, write = job.throw(exc)
            else:
                op, write = job.send(result)
    except StopIteration as stop:
        return stop.value


async def arun_job(saver: Any, job: Job[T]) -> T:
    """``run_job`` on an async saver (``await saver.arun`` per step)."""
    try:
        op, write = next(job)
        while True:
            try:
                result = await saver.arun(op, write=write)
            except Exception as exc:
                op, write = job.throw(exc)
            else:
                op, write = job.send(result)
    except StopIteration as stop:
        return stop.value
