"""Benchmark studies: the published experiments (docs/references.md) re-run on this machine, cubeslab
and today's tools measured side by side in the same run (``cubeslab bench STUDY``).

Each study module has ``TITLE``, ``REFERENCES``, ``SIZES`` (size name → its parameters) and
``run(study_run, params)``; :func:`run` gives it a :class:`~cubeslab_bench.study.StudyRun`, saves what
it found as ``OUT/STUDY.json`` and rebuilds ``OUT/report.html`` from every study file in OUT.
"""

from __future__ import annotations

import importlib
import os
from enum import StrEnum
from pathlib import Path

from . import report, tools
from .study import StudyRun

STUDIES = {
    "pyrus": "pyrus",
    "openmsi": "openmsi",
    "formats": "formats",
    "queue-depth": "queue_depth",
    "peers": "peers",
}
"""Study name (as the command line takes it) → module in this package."""


class Size(StrEnum):
    """tiny: the test that keeps a study working (seconds); small: ``make bench``; medium and large:
    the published scales where this machine can hold them."""

    tiny = "tiny"
    small = "small"
    medium = "medium"
    large = "large"


def study_module(name: str):
    if name not in STUDIES:
        raise ValueError(f"unknown study {name!r}; studies: {', '.join(STUDIES)}")
    return importlib.import_module(f".{STUDIES[name]}", __name__)


def run(
    name: str,
    *,
    size: str = "small",
    peers: str | None = None,
    out: str | os.PathLike = "cubeslab-bench",
    data: str | os.PathLike | None = None,
    runs: int | None = None,
) -> Path:
    """Run one study; returns the report's path. ``data``: where generated inputs are kept
    (default ``OUT/data``), reused by later runs of the same size."""
    if size not in Size.__members__:
        raise ValueError(f"unknown size {size!r}; sizes: {', '.join(Size)}")
    module = study_module(name)
    out = Path(out)
    study_run = StudyRun(
        study=name,
        title=module.TITLE,
        references=module.REFERENCES,
        size=size,
        out=out,
        data=Path(data) if data is not None else out / "data",
        selection=tools.parse_selection(peers),
    )
    if runs is not None:
        study_run.runs = max(runs, 5)
    module.run(study_run, module.SIZES[size])
    study_run.save()
    return report.build(out, list(STUDIES))
