"""Dask arrays written into stores: each task writes whole shards through window writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import defaults
from .create import create
from .cube import Cube
from .errors import InvalidInputError, StoreExistsError
from .locations import S3Path, store_path
from .opener import open as open_store


class _ShardWriter:
    """The target of ``dask.array.store``: each task opens the store for writing in its own process,
    writes its block (whole shards) and closes it, which flushes the block to the store (a store on S3
    carries its connection's options to the workers)."""

    def __init__(self, path: Path | S3Path, cache: int):
        self.path, self.cache = path, cache

    def __setitem__(self, key, block: np.ndarray) -> None:
        with open_store(self.path, "r+", cache=self.cache) as cube:
            cube.amplitude[key] = block


def store(source, target, *, compute: bool = True, storage_options: dict | None = None, **create_options):
    """Write the dask array (or numpy array) ``source`` into ``target``: a store's path or ``s3://`` URL
    (created here, with ``create_options`` as :func:`cubeslab.create` takes them; one there already is
    refused, as ``create`` refuses it) or a :class:`Cube` opened for writing (``cubeslab.open(path, "r+")``,
    same shape), whose values are replaced where ``source`` lies: its pending writes are flushed first, and
    it sees the tasks' writes once they are done (``compute=False``: after ``target.refresh()``).

    ``source`` is rechunked to the store's shards, so each task writes whole shards and no two tasks
    write the same one; tasks run wherever dask runs them (a cluster's workers share a local store's
    filesystem; a store on S3 they reach with ``storage_options``, or their own ``AWS_*`` variables).
    Returns the dask result when ``compute=False``."""
    import dask.array as da

    if not isinstance(source, da.Array):
        source = da.asarray(source)  # a numpy array (or any array-like) is one dask chunk, rechunked below
    if isinstance(target, Cube):
        if not target.amplitude.writable:
            raise InvalidInputError(
                f"{target.path} is open read-only; open it with cubeslab.open(path, 'r+') to store into it"
            )
        if create_options:
            raise InvalidInputError(f"{target.path} exists: create options apply to a new store")
        path = target.path if storage_options is None else store_path(target.path, storage_options)
        target.flush()  # its cached changes would otherwise overwrite the tasks' shards when flushed later
    else:
        path = store_path(target, storage_options)
        try:
            create(path, source.shape, source.dtype, **create_options).close()
        except StoreExistsError as error:  # as create refuses it: a store is replaced only on purpose
            raise StoreExistsError(
                f"{error}. To store into it, pass cubeslab.open(path, 'r+') as the target"
            ) from None
    existing = open_store(path)
    if tuple(existing.shape) != tuple(source.shape):
        raise InvalidInputError(f"{path}: shape {existing.shape}, but the dask array's is {source.shape}")
    if not np.can_cast(source.dtype, existing.dtype, casting="same_kind"):
        raise InvalidInputError(  # as a window write refuses it: the values would change
            f"{path}: storing {source.dtype} values into a {existing.dtype} array would change them; "
            f"convert them first (source.astype(...))"
        )
    shards = existing.amplitude.shards or existing.amplitude.chunks
    # Cast by each task's window write, which refuses values the cast would change (1e300 into float32).
    aligned = source.rechunk(shards)
    block_bytes = int(np.prod(shards)) * existing.dtype.itemsize
    cache = max(block_bytes * 2, defaults.WRITE_CACHE // 8)
    # dask takes any object with __setitem__ as a target; its annotation names arrays only.
    written = da.store(aligned, _ShardWriter(path, cache), lock=False, compute=compute)  # type: ignore[arg-type]
    if compute and isinstance(target, Cube):
        target.refresh()
    return written
