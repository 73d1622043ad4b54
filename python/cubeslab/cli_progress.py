"""Progress bars of the CLI: one per phase of an engine job, with its own total and rate."""

from __future__ import annotations

import time

from rich import filesize
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from .jobs import Phase


class AmountColumn(ProgressColumn):
    """Done and total in the phase's unit: bytes (decimal units) or items."""

    def render(self, task: Task) -> Text:
        total = int(task.total or 0)
        if task.fields.get("unit") == "bytes":
            return Text(f"{filesize.decimal(int(task.completed))}/{filesize.decimal(total)}", style="green")
        return Text(f"{int(task.completed):,}/{total:,}", style="green")


class RateColumn(ProgressColumn):
    """The phase's rate: bytes or items per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if speed is None:
            return Text("", style="red")
        if task.fields.get("unit") == "bytes":
            return Text(f"{filesize.decimal(int(speed))}/s", style="red")
        return Text(f"{speed:,.0f}/s", style="red")


class PhaseBars:
    """One bar per phase of an engine job, each with its own total and rate; all of them
    cleared when the job ends (a finished job prints its summary, a failed one its error). Where the
    console is no terminal (a log, a pipe), a line as each phase ends instead: bars would print nothing."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lines = not console.is_terminal
        self.last: Phase | None = None
        self.started = time.monotonic()
        self.bars = Progress(
            TextColumn("{task.description}"), BarColumn(), AmountColumn(), RateColumn(),
            TimeRemainingColumn(), console=self.console, transient=True,
        )  # fmt: skip
        self.number = 0
        self.task: TaskID | None = None

    def __enter__(self) -> PhaseBars:
        if not self.lines:
            self.bars.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.lines:
            self._said(self.last)
        else:
            self.bars.stop()

    def _said(self, phase: Phase | None) -> None:
        """A line saying how far ``phase`` went, and in what time."""
        if phase is None:
            return
        amount = (
            f"{filesize.decimal(phase.done)}/{filesize.decimal(phase.total)}"
            if phase.unit == "bytes"
            else f"{phase.done:,}/{phase.total:,}"
        )
        took = time.monotonic() - self.started
        self.console.print(f"{escape(phase.name)}: {amount} in {took:.1f} s", highlight=False, soft_wrap=True)

    def update(self, phase: Phase) -> None:
        if self.lines:
            if self.last is not None and phase.number != self.last.number:
                self._said(self.last)
                self.started = time.monotonic()
            self.last = phase
            return
        if phase.number != self.number:
            self.number = phase.number
            self.task = self.bars.add_task(escape(phase.name), total=phase.total, unit=phase.unit)
        if self.task is not None:
            self.bars.update(self.task, completed=phase.done, total=phase.total)
