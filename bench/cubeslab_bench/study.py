"""One run of a study: its settings, where it writes, and what it found (tables, plots, notes).

A study module fills a :class:`StudyRun`; :meth:`StudyRun.save` writes ``OUT/STUDY.json`` and the
report (:mod:`cubeslab_bench.report`) is built from those files, so every figure in it comes from a
run recorded beside it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import machine, tools
from .measure import MIN_RUNS


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list]
    note: str = ""
    published: str = ""
    """Non-empty for a table of published figures: the source document they come from."""


@dataclass
class Plot:
    file: str
    caption: str


@dataclass
class StudyRun:
    study: str
    title: str
    references: str
    size: str
    out: Path
    data: Path
    selection: set[str] | None = None
    runs: int = MIN_RUNS
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    notes: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    results: dict = field(default_factory=dict)
    """The raw measurements (every run's median, min and max), for anyone re-plotting."""
    bandwidth: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.data.mkdir(parents=True, exist_ok=True)
        self._t0 = time.perf_counter()
        self.machine = machine.describe(self.data)

    def peer(self, tool: str) -> bool:
        """True if ``tool`` is selected and installed; otherwise it is recorded as skipped."""
        if self.selection is not None and tool not in self.selection:
            self.skipped[tool] = "not selected (--peers)"
            return False
        reason = tools.missing(tool)
        if reason is not None:
            self.skipped[tool] = reason
            return False
        return True

    def note(self, text: str) -> None:
        self.notes.append(text)

    def table(self, title: str, columns: list[str], rows: list[list], note: str = "", published: str = ""):
        self.tables.append(Table(title, columns, rows, note, published))

    def plot(self, figure, name: str, caption: str) -> None:
        """Save a matplotlib figure as ``OUT/STUDY-NAME.png`` and list it in the report."""
        import matplotlib.pyplot as plt

        file = f"{self.study}-{name}.png"
        figure.savefig(self.out / file, dpi=110, bbox_inches="tight")
        plt.close(figure)
        self.plots.append(Plot(file, caption))

    def save(self) -> Path:
        document = {
            "study": self.study,
            "title": self.title,
            "references": self.references,
            "size": self.size,
            "started": self.started,
            "seconds": round(time.perf_counter() - self._t0, 1),
            "runs": self.runs,
            "machine": self.machine,
            "bandwidth": self.bandwidth,
            "notes": self.notes,
            "tables": [asdict(t) for t in self.tables],
            "plots": [asdict(p) for p in self.plots],
            "skipped": self.skipped,
            "results": self.results,
        }
        path = self.out / f"{self.study}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(document, indent=1, default=_jsonable))
        tmp.replace(path)
        return path


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# -- cell formatting shared by the studies ---------------------------------------------------------


def ms(timing: dict | None, digits: int = 3) -> str:
    """A timing as 'median (min–max)' in milliseconds; '—' when absent."""
    if not timing:
        return "—"
    f = number(digits)
    return f"{f(timing['median_s'] * 1e3)} ({f(timing['min_s'] * 1e3)}–{f(timing['max_s'] * 1e3)})"


def ms_value(seconds: float | None, digits: int = 3) -> str:
    return "—" if seconds is None else number(digits)(seconds * 1e3)


def mib(n: float | None) -> str:
    return "—" if n is None else f"{n / 2**20:.1f}"


def ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}x" if x >= 1 else f"{x:.2g}x"


def number(digits: int = 3):
    """A formatter to ``digits`` significant digits, without exponents."""

    def f(x: float) -> str:
        if x == 0:
            return "0"
        text = f"{x:.{digits}g}"
        return f"{float(text):,.0f}" if "e" in text or abs(x) >= 10**digits else text

    return f
