"""What a SEG-Y export had to leave out, said: values written since the ingest where the survey has no
trace have no trace header to go with them."""

from __future__ import annotations

import os
import warnings

from .cube import Cube
from .errors import ExportWarning


def said_left_out(
    store: str | os.PathLike, output: str | os.PathLike, traces: int, left_out: int, first: list[int] | None
) -> int:
    """The engine's SEG-Y export result (``traces`` written; ``left_out`` positions without a trace holding
    written values, the ``first`` of them by position): an :class:`ExportWarning` naming the first by its
    labels in ``store`` if any was left out. Returns ``traces``."""
    if first is not None:
        cube = Cube(store)
        where = ", ".join(f"{dim} {cube.coords[dim][at]}" for dim, at in zip(cube.dims, first, strict=False))
        warnings.warn(
            ExportWarning(
                f"{store}: {left_out} trace position(s) the survey has no trace at (trace_mask false) hold "
                f"values written since the ingest, the first at {where}; SEG-Y holds traces with their "
                f"headers, and these have none, so {output} leaves them out (export to .npy, .h5, .nc or "
                ".fits to keep them)"
            ),
            stacklevel=3,
        )
    return traces
