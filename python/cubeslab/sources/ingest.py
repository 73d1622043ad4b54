"""An N-D array file into a store: planned like a SEG-Y ingest, written in slabs of whole shards
through the engine's window writer within the memory bound, and published only when complete. The
pieces (plan, slab writing, summary) serve every non-SEG-Y source."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import _engine, defaults
from ..array import Array
from ..create import new_store, node_name_problem
from ..description import AXES_ATTR
from ..errors import IngestWarning
from ..labels import is_text
from ..locations import publishing, recorded_source, store_size
from ..plan import plan
from .raw import ArraySource

Progress = Callable[[int, int], None]
"""Called with (bytes written, bytes in all) after each slab."""


def natural_access(chunks) -> str | None:
    """The reads a chunked source was laid out for: boxes of its chunk shape (None: the planner's
    default, every plane)."""
    return f"box:{'x'.join(str(int(c)) for c in chunks)}" if chunks else None


def planned(
    shape, dtype, layout: str, access: str | None, compress: str | None, memory_limit: int
) -> tuple[list, list]:
    """(chunks, shards) the planner picks for an array, as for an ingest within ``memory_limit`` bytes."""
    # The planner bounds a shard by a SEG-Y ingest task's memory, traces' headers included; an array
    # that fits a quarter of the bound whole needs no bound (the model's per-trace cost would refuse it).
    whole = int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize
    bound = memory_limit if whole > memory_limit // 4 else None
    picked = plan(shape, dtype, layout=layout, access=access, compress=compress, top=1, memory_limit=bound)[
        0
    ]["layout"]
    return picked["inner"], picked["shard"]


def dimension_names(labels: list[str]) -> list[str]:
    """The store's names for axes a file labels (a FITS CTYPE, a SEPlib label): each label with path
    separators made ``_``, or ``dim_N`` where that is still no name for a folder in the store or
    repeats another axis's."""
    names: list[str] = []
    for d, label in enumerate(labels):
        name = str(label).strip().replace("/", "_").replace("\\", "_")
        names.append(f"dim_{d}" if node_name_problem(name) or name in names else name)
    return names


def write_in_slabs(
    out: Array, read: Callable[[int, int], np.ndarray], shards, limit: int, progress: Progress | None
) -> None:
    """Write ``read(start, stop)`` (rows of the first axis) into ``out`` in slabs of whole shards of
    half the memory bound each; ``out``'s write cache holds the other half."""
    shape, dtype = out.shape, out.dtype
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    rows = max(shards[0], (limit // 2 // max(row_bytes, 1)) // shards[0] * shards[0])
    for start in range(0, shape[0], rows):
        stop = min(shape[0], start + rows)
        out[start:stop] = read(start, stop)
        if progress is not None:
            progress(stop * row_bytes, shape[0] * row_bytes)


def summary(
    source: str, store, shape, dtype: np.dtype, chunks, shards, layout: str, access: str | None, staging
) -> dict:
    """What an ingest reports; ``staging``: the store's folder before it is published (a store on
    object storage is measured there)."""
    return {
        "source": recorded_source(source),
        "shape": list(shape),
        "dtype": dtype.name,
        "plan": {
            "layout": f"{'x'.join(map(str, chunks))}/{'x'.join(map(str, shards))}",
            "strategy": layout,
            "access": access or "planes",
        },
        "store": os.fspath(store),
        "stored_bytes": store_size(Path(staging)),
    }


def ingest_array(
    source: ArraySource,
    store: str | os.PathLike,
    *,
    overwrite: bool = False,
    durable: bool = False,
    layout: str = defaults.LAYOUT,
    access: str | None = None,
    compress: str | None = None,
    memory_limit: int | None = None,
    progress: Progress | None = None,
) -> dict:
    """Write ``source`` into a new store at ``store``; returns the summary."""
    shape, dtype = source.shape, source.dtype
    limit = int(memory_limit or defaults.MEMORY_LIMIT)
    access = access or natural_access(source.chunks)
    chunks, shards = planned(shape, dtype, layout, access, compress, limit)
    with publishing(store, overwrite) as publication:
        attributes: dict = {"source": recorded_source(source.path), **(source.attributes or {})}
        dims = [f"dim_{d}" for d in range(len(shape))]
        coords: dict = {}
        if source.axes is not None:
            dims = dimension_names([a["name"] for a in source.axes])
            recorded = [{k: a[k] for k in ("origin", "step", "unit")} for a in source.axes]
            attributes["cubeslab"] = {AXES_ATTR: recorded}
            # Axes the source gives a scale (a SEPlib o/d, a FITS WCS, an HDF5 dimension scale, even or
            # not) become coordinate arrays, as xarray shows them.
            for dim, a, n in zip(dims, source.axes, shape, strict=True):
                if a.get("values") is not None:
                    values = np.asarray(a["values"])
                    values = values if is_text(values) else values.astype(np.float64)
                elif (a["origin"], a["step"]) != (0.0, 1.0) or a.get("unit"):
                    values = a["origin"] + a["step"] * np.arange(n, dtype=np.float64)
                else:
                    continue
                # The unit on the coordinate too, where CF readers (xarray) look for it.
                coords[dim] = ((dim,), values, {"units": a["unit"]}) if a.get("unit") else values
        for name, (axes, values, own) in (source.auxiliary or {}).items():
            if name in dims:
                continue  # a dimension's own coordinate comes from its scale
            if (problem := node_name_problem(name)) is not None:
                warnings.warn(
                    IngestWarning(f"{source.path}: coordinate {name} {problem}; not stored"), stacklevel=2
                )
                continue
            coords[name] = (tuple(dims[d] for d in axes), values, own)
        with new_store(
            Path(publication.staging), shape, dtype, dims=dims, coords=coords, chunks=chunks,
            shards=shards, compress=compress, cache=max(limit // 2, 1), attributes=attributes,
            identified=True,
        ) as out:  # fmt: skip
            write_in_slabs(out.amplitude, source.read, shards, limit, progress)
        _engine.mark_complete(publication.staging)
        report = summary(
            source.path, store, shape, dtype, chunks, shards, layout, access, publication.staging
        )
        publication.commit(durable)
        return report
