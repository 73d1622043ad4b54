"""A store out to an N-D array file: ``.npy``, written slab by slab (within a bounded memory) under a
temporary name, then renamed into place."""

from __future__ import annotations

import os

import numpy as np

from .. import defaults
from ..errors import StoreExistsError


def export_npy(store: str | os.PathLike, output: str | os.PathLike, *, overwrite: bool = False) -> int:
    """Write the store's array to ``output`` (.npy); returns the number of elements."""
    from ..cube import Cube

    if os.path.exists(output) and not overwrite:
        raise StoreExistsError(f"{output} already exists; pass overwrite (--overwrite) to replace it")
    array = Cube(store).amplitude
    temporary = f"{os.fspath(output)}.tmp"
    out = np.lib.format.open_memmap(temporary, mode="w+", dtype=array.dtype, shape=array.shape)
    try:
        row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize)
        rows = max(1, defaults.MEMORY_LIMIT // 2 // row_bytes)
        for start in range(0, array.shape[0], rows):
            out[start : start + rows] = array[start : start + rows]
        out.flush()
        del out
        os.replace(temporary, output)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return int(np.prod(array.shape))
