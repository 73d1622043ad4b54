"""A store out to an N-D array file: ``.npy``, or a SEPlib ``.H`` header and its binary; written slab by
slab (within a bounded memory) under a temporary name, then renamed into place."""

from __future__ import annotations

import os

import numpy as np

from .. import defaults
from ..errors import InvalidInputError, StoreExistsError


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


def export_seplib(store: str | os.PathLike, output: str | os.PathLike, *, overwrite: bool = False) -> int:
    """Write the store as a SEPlib cube: ``output`` (.H) and its binary ``output@`` (xdr, big-endian),
    the store's last axis as n1. Returns the number of elements."""
    from ..description import describe

    header, binary = os.fspath(output), f"{os.fspath(output)}@"
    for path in (header, binary):
        if os.path.exists(path) and not overwrite:
            raise StoreExistsError(f"{path} already exists; pass overwrite (--overwrite) to replace it")
    description = describe(store)
    formats = {"f": ("xdr_float", ">f"), "i": ("xdr_int", ">i")}
    dtype = np.dtype(description["dtype"])
    if (dtype.kind, dtype.itemsize) not in (("f", 4), ("f", 8), ("i", 4)):
        raise InvalidInputError(f"{store}: SEPlib has no data_format for {dtype}")
    name, code = formats[dtype.kind]
    if dtype.itemsize == 8:
        name = "xdr_double"
    from ..cube import Cube

    array = Cube(store).amplitude
    temporary = f"{binary}.tmp"
    try:
        with open(temporary, "wb") as f:
            row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * dtype.itemsize)
            rows = max(1, defaults.MEMORY_LIMIT // 2 // row_bytes)
            for start in range(0, array.shape[0], rows):
                f.write(array[start : start + rows].astype(f"{code}{dtype.itemsize}").tobytes())
        os.replace(temporary, binary)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    lines = []
    for number, axis in enumerate(reversed(description["axes"]), start=1):
        line = f"n{number}={axis['size']} o{number}={axis['origin']!r} d{number}={axis['step']!r}"
        line += f' label{number}="{axis["name"]}"'
        if axis.get("unit"):
            line += f' unit{number}="{axis["unit"]}"'
        lines.append(line)
    lines += [f"esize={dtype.itemsize} data_format={name}", f'in="{os.path.basename(binary)}"']
    with open(f"{header}.tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(f"{header}.tmp", header)
    return int(np.prod(array.shape))
