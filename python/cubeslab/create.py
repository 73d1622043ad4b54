"""`create`: a new, empty N-D array store, open for window writes."""

from __future__ import annotations

import os

import numpy as np

from .array import Array
from .cube import Cube, open
from .description import create_arguments
from .errors import InvalidInputError, StoreExistsError
from .plan import plan


def create(
    path: str | os.PathLike,
    shape=None,
    dtype="float32",
    *,
    dims=None,
    chunks=None,
    shards=None,
    access: str | None = None,
    compress: str | None = None,
    fill_value=None,
    attributes: dict | None = None,
    cache: int | str | None = None,
    description: dict | None = None,
) -> Cube:
    """Create an empty N-D array store and open it for writing (as ``open(path, "r+")``).

    ``description``: a store's JSON description (see :func:`cubeslab.describe`) instead of the
    other arguments. Without ``chunks``, the planner chooses chunks and shards for ``access`` (default: every
    plane), as ingest does. ``compress`` takes the ``--compress`` names with fixed parameters
    (``zstd:3``, ``zfp:tolerance=0.01``, ...); error targets (``zfp:snr=40``,
    ``zfp:max-error=...``) need data to tune on and are refused here.
    """
    if description is not None:
        return create(path, cache=cache, **create_arguments(description))
    if shape is None:
        raise InvalidInputError("create needs a shape (or a description)")
    if os.path.lexists(path):
        raise StoreExistsError(f"{path} already exists; create makes a new store (remove the old one first)")
    shape = tuple(int(n) for n in shape)
    dtype = np.dtype(dtype)
    if chunks is None:
        if shards is not None:
            raise InvalidInputError("shards= needs chunks= (the chunks inside each shard)")
        layout = plan(shape, dtype, access=access, compress=compress, top=1)[0]["layout"]
        chunks, shards = layout["inner"], layout["shard"]
    Array.create(
        path, shape, dtype, chunks=chunks, shards=shards, compress=compress,
        dimension_names=dims, attributes=attributes, fill_value=fill_value,
    )  # fmt: skip
    return open(path, "r+", cache=cache)
