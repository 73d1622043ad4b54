"""An N-D array file into a store: planned like a SEG-Y ingest, written in slabs of whole shards
through the engine's window writer within the memory bound, and published only when complete."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from .. import _engine, defaults
from ..create import create
from ..plan import plan
from .raw import ArraySource


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
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Write ``source`` into a new store at ``store``; returns the summary. ``progress(done, total)``
    is called with bytes after each slab."""
    shape, dtype = source.shape, source.dtype
    limit = int(memory_limit or defaults.MEMORY_LIMIT)
    picked = plan(shape, dtype, layout=layout, access=access, compress=compress, top=1)[0]["layout"]
    chunks, shards = picked["inner"], picked["shard"]
    # Slabs of whole shards along the first axis, half the bound each; the cache holds the other half.
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    rows = max(shards[0], (limit // 2 // max(row_bytes, 1)) // shards[0] * shards[0])
    publication = _engine.Publication(os.fspath(store), overwrite)
    staging = os.fspath(publication.staging)
    total = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    attributes: dict = {"source": source.path, **(source.attributes or {})}
    dims = [f"dim_{d}" for d in range(len(shape))]
    if source.axes is not None:
        names = [a["name"] for a in source.axes]
        dims = names if len(set(names)) == len(names) else dims
        attributes["cubeslab"] = {
            "axes": [{k: a[k] for k in ("origin", "step", "unit")} for a in source.axes]
        }
    with create(
        staging, shape, dtype, dims=dims, chunks=chunks, shards=shards, compress=compress,
        cache=max(limit // 2, 1), attributes=attributes,
    ) as out:  # fmt: skip
        for start in range(0, shape[0], rows):
            stop = min(shape[0], start + rows)
            out[start:stop] = source.read(start, stop)
            if progress is not None:
                progress(stop * row_bytes, total)
    publication.commit(durable)
    stored = sum(f.stat().st_size for f in _files(store))
    return {
        "source": source.path,
        "shape": list(shape),
        "dtype": dtype.name,
        "plan": {"layout": f"{'x'.join(map(str, chunks))}/{'x'.join(map(str, shards))}", "strategy": layout},
        "stored_bytes": stored,
    }


def _files(store: str | os.PathLike):
    from pathlib import Path

    return [p for p in Path(store).rglob("*") if p.is_file()]
