"""Dask arrays written into stores: each task writes whole shards through window writes."""

from __future__ import annotations

import os

import numpy as np

from . import defaults
from .create import create
from .cube import Cube
from .errors import InvalidInputError
from .opener import open as open_store


class _ShardWriter:
    """The target of ``dask.array.store``: each task opens the store for writing in its own process,
    writes its block (whole shards) and closes it, which flushes the block to disk."""

    def __init__(self, path: str, cache: int):
        self.path, self.cache = path, cache

    def __setitem__(self, key, block: np.ndarray) -> None:
        with open_store(self.path, "r+", cache=self.cache) as cube:
            cube.amplitude[key] = block


def store(source, target, *, compute: bool = True, **create_options):
    """Write the dask array ``source`` into ``target``: a store's path (created here, with
    ``create_options`` as :func:`cubeslab.create` takes them) or a :class:`Cube` / store path that exists
    (same shape). ``source`` is rechunked to the store's shards, so each task writes whole shards and no
    two tasks write the same one; tasks run wherever dask runs them (a cluster's workers share the
    store's filesystem). Returns the dask result when ``compute=False``."""
    import dask.array as da

    if isinstance(target, Cube):
        path = os.fspath(target.path)
    else:
        path = os.fspath(target)
        if not os.path.exists(path):
            create(path, source.shape, source.dtype, **create_options).close()
        elif create_options:
            raise InvalidInputError(f"{path} exists: create options apply to a new store")
    existing = open_store(path)
    if tuple(existing.shape) != tuple(source.shape):
        raise InvalidInputError(f"{path}: shape {existing.shape}, but the dask array's is {source.shape}")
    shards = existing.amplitude.shards or existing.amplitude.chunks
    aligned = source.astype(existing.dtype).rechunk(shards)
    block_bytes = int(np.prod(shards)) * existing.dtype.itemsize
    cache = max(block_bytes * 2, defaults.WRITE_CACHE // 8)
    # dask takes any object with __setitem__ as a target; its annotation names arrays only.
    return da.store(aligned, _ShardWriter(path, cache), lock=False, compute=compute)  # type: ignore[arg-type]
