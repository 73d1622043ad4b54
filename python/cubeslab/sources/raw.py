"""Arrays stored as plain bytes: ``.npy`` files, and raw binary described by shape, type, order and
offset. Both are read through a memory map, slab by slab."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import _engine
from ..errors import InvalidInputError, OptionError

NPY_MAGIC = b"\x93NUMPY"
RAW_DTYPE, RAW_ORDER, RAW_OFFSET = "raw_dtype", "raw_order", "raw_offset"
"""The attributes that record how an ingest read raw bytes: their type (``>f4``), order and offset."""


@dataclass
class ArraySource:
    """An N-D array in a file, read in slabs along its first axis."""

    path: str
    data: np.ndarray  # a memory map
    kind: str  # "npy", "raw", "seplib" or "fits"
    axes: list[dict] | None = None  # name, origin, step, unit per axis, where the file gives them
    convert: Callable[[np.ndarray], np.ndarray] | None = None  # raw values to stored ones (FITS scaling)
    stored_dtype: np.dtype | None = None  # the type `convert` gives
    attributes: dict | None = None  # the file's own metadata, kept with the store
    # Reads rows start:stop faster than slicing `data` (an HDF5 dataset read in place, in parallel).
    slab_reader: Callable[[int, int], np.ndarray] | None = None
    chunks: tuple[int, ...] | None = None  # the file's own chunk shape, if it is chunked
    # CF's auxiliary coordinates, by name: the axes each lies along, its values and attributes.
    auxiliary: dict[str, tuple[tuple[int, ...], np.ndarray, dict]] | None = None

    def __post_init__(self) -> None:
        check_storable(self.path, self.shape, self.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        """The element type a store keeps: the file's (or its conversion's), in this machine's byte order."""
        return (self.stored_dtype or self.data.dtype).newbyteorder("=")

    def describe(self) -> dict:
        """What ``cubeslab info`` shows of the file before an ingest."""
        order = "F" if self.data.flags.f_contiguous and not self.data.flags.c_contiguous else "C"
        described = {
            "file": self.path,
            "format": self.kind,
            "shape": list(self.shape),
            "dtype": str(self.data.dtype),
            "order": order,
            "bytes": int(self.data.nbytes),
        }
        if self.stored_dtype is not None:  # values converted (FITS's BSCALE and BZERO): what a reader gets
            described["stored_dtype"] = str(self.dtype)
        return described

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of the first axis, C-contiguous, in native byte order."""
        rows = self.slab_reader(start, stop) if self.slab_reader is not None else self.data[start:stop]
        if self.convert is not None:
            rows = self.convert(rows)
        return np.ascontiguousarray(rows, dtype=self.dtype)


def check_storable(path, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse, naming the file, an array the engine does not store: its dimensions, an empty side, or
    its element type."""
    if not 1 <= len(shape) <= _engine.max_dims():
        raise InvalidInputError(
            f"{path}: an array of {len(shape)} dimensions {shape}; cubeslab stores 1 to {_engine.max_dims()}"
        )
    if 0 in shape:
        raise InvalidInputError(f"{path}: shape {shape} has a side of 0; cubeslab stores non-empty arrays")
    if np.dtype(dtype).name not in _engine.dtypes():
        raise InvalidInputError(
            f"{path}: element type {dtype} is not one cubeslab stores ({', '.join(_engine.dtypes())})"
        )


def npy_source(path: str | os.PathLike) -> ArraySource:
    try:
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as error:  # object arrays, a damaged header
        raise InvalidInputError(f"{path}: not an .npy file cubeslab reads: {error}") from None
    return ArraySource(os.fspath(path), data, "npy")  # its shape and type are checked there


def raw_source(path: str | os.PathLike, *, shape, dtype, order: str, offset: int) -> ArraySource:
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise OptionError(f"--dtype {dtype!r} is not a numpy type") from None
    shape = tuple(int(n) for n in shape)
    if not shape or any(n <= 0 for n in shape):
        raise OptionError(f"--shape {shape}: every side must be a positive integer")
    check_storable(path, shape, dtype)  # before the map: numpy maps any type
    if order not in ("C", "F"):
        raise OptionError(f"--order {order!r}: C (last axis fastest) or F (first axis fastest)")
    if offset < 0:
        raise OptionError(f"--offset {offset}: give a byte count of 0 or more")
    size = os.path.getsize(path)
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    if size != expected:
        raise InvalidInputError(
            f"{path}: {size:,} bytes, but --shape {'x'.join(map(str, shape))} of {dtype} from offset "
            f"{offset} needs {expected:,}"
        )
    data = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)  # type: ignore[call-overload]
    # Kept with the store, so that `verify --against` reads the bytes as the ingest did.
    recorded = {RAW_DTYPE: dtype.str, RAW_ORDER: order, RAW_OFFSET: offset}
    return ArraySource(os.fspath(path), data, "raw", attributes=recorded)
