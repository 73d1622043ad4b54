"""Long engine jobs run on a worker thread and watched from the caller's: their phases reported as
they go, Ctrl-C turned into a stop request the engine honours."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import _engine


@dataclass(frozen=True)
class Phase:
    """Where a long job is: the phase running (``scan headers``, ``tune compression``,
    ``write volume``, ``write amplitude_inline``, ...), its number from 1, what it counts
    (``bytes`` or ``items``), and how far it is."""

    name: str
    number: int
    unit: str
    done: int
    total: int


ProgressCallback = Callable[[Phase], None]
"""Called about ten times a second with the job's :class:`Phase`; every phase that ended is
reported once more as it ended before the next one's first report."""

POLL_SECONDS = 0.1


def run_watched(work: Callable[[Any], Any], progress: ProgressCallback | None) -> Any:
    """Run ``work(handle)`` (engine calls that release the GIL) on a worker thread, reporting
    the engine's progress ``handle`` to ``progress`` from this one. Ctrl-C here asks the engine
    to stop, waits for it, and raises KeyboardInterrupt."""
    handle = _engine.Progress()
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work(handle)
        except BaseException as error:  # re-raised on the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=target, name="cubeslab-engine", daemon=True)

    reported = 0  # phases that ended and were reported

    def report() -> None:
        nonlocal reported
        if progress is None:
            return
        # The running phase first: every phase before it has ended by then, so the list read next
        # holds them all, and a phase that began meanwhile is never reported before its predecessors.
        current = Phase(*handle.snapshot())
        ended = [Phase(*phase) for phase in handle.ended()]
        for phase in ended[reported:]:
            progress(phase)
        reported = len(ended)
        if not ended or current.number > ended[-1].number:  # else it ended meanwhile: reported above
            progress(current)

    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_SECONDS)
            report()
    except KeyboardInterrupt:
        handle.stop()
        worker.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
