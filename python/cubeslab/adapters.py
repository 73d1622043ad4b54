"""dask views of arrays: thin adapters over `Array` reads."""

from __future__ import annotations

import numpy as np

from .array import Array
from .errors import SelectionError


def to_dask(array: Array, chunks=None):
    """A dask array whose tasks read through the engine. ``chunks``: ``"shards"`` (the default: one task
    per shard, so a 100 TB store of 1 GB shards is 10^5 tasks), ``"inner"`` (one per inner chunk), or
    dask's own chunk argument."""
    import dask.array as da

    if chunks is None or chunks == "shards":
        chunks = array.shards or array.chunks
    elif chunks == "inner":
        chunks = array.chunks
    try:
        return da.from_array(
            array, chunks=chunks, lock=False, asarray=False, meta=np.empty((0,) * array.ndim, array.dtype)
        )
    except ValueError as error:
        raise SelectionError(
            f"{array.path}: chunks={chunks!r}: {error} (give 'shards', 'inner', or dask's chunks for shape "
            f"{array.shape})"
        ) from None
