"""`Hdf5Array`: an HDF5 dataset or NetCDF 4 variable read in place by the engine, no ingest.

h5py opens the file once to find the dataset, its filters and its chunk index; then every read goes to
the engine, which reads the chunks' bytes from the file in parallel and decodes them (deflate, shuffle,
fletcher32, zstd, lz4, blosc) straight into the output. Values are the stored ones, in native byte
order: a NetCDF variable's ``scale_factor``, ``add_offset`` and ``_FillValue`` are in its attributes,
not applied (as ``xarray.open_dataset(..., mask_and_scale=False)``).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import io
import os

import numpy as np

from . import _engine
from .array import WHOLE_ARRAY, Array, ReadSettings
from .errors import InvalidInputError
from .hdf5_file import dataset_attributes, dataset_axes, is_hdf5_file, open_dataset


def chunk_table(path: str, name: str, data) -> np.ndarray:
    """One row per stored chunk of an h5py dataset: its origin, then byte offset, size, filter mask."""
    rows: list[tuple[int, ...]] = []
    dsid = data.id
    if hasattr(dsid, "chunk_iter"):
        dsid.chunk_iter(lambda c: rows.append((*c.chunk_offset, c.byte_offset, c.size, c.filter_mask)))
    else:  # HDF5 before 1.12.3: one call per chunk
        for i in range(dsid.get_num_chunks()):
            c = dsid.get_chunk_info(i)
            rows.append((*c.chunk_offset, c.byte_offset, c.size, c.filter_mask))
    unlimited = [d for d, most in enumerate(data.maxshape) if most is None]
    if len(unlimited) == 1 and unlimited[0] > 0:
        # An extensible-array index orders chunks with the unlimited dimension first; some HDF5 versions
        # report their origins in that order.
        index = _chunk_index_type(data)
        reported = _extensible_array_origins() if index == EXTENSIBLE_ARRAY_INDEX else "as they are"
        if reported == "unlimited first":
            rows = [(*_unlimited_put_back(row[: data.ndim], data.chunks, data.maxshape, unlimited[0]),
                     *row[data.ndim :]) for row in rows]  # fmt: skip
        elif index is None or reported != "as they are":
            raise InvalidInputError(
                f"{path}: dataset {name} can grow along dimension {unlimited[0]}, and cubeslab cannot tell "
                "where this HDF5 library says its chunks are; read it with h5py"
            )
    return np.array(rows, dtype=np.uint64).reshape(-1, data.ndim + 3)


EXTENSIBLE_ARRAY_INDEX = 4
"""``H5D_CHUNK_IDX_EARRAY``: the chunk index of a dataset with one unlimited dimension (HDF5 1.10 format)."""


def _chunk_index_type(data) -> int | None:
    """The dataset's chunk index (``H5Dget_chunk_index_type``, which h5py does not expose), or None."""
    library = _hdf5_library(data.id.id)
    if library is None or not hasattr(library, "H5Dget_chunk_index_type"):
        return None
    kind = ctypes.c_int(-1)
    if library.H5Dget_chunk_index_type(ctypes.c_int64(data.id.id), ctypes.byref(kind)) < 0:
        return None
    return kind.value


def _unlimited_put_back(origin, chunks, maxshape, unlimited: int) -> tuple[int, ...]:
    """The origin of a chunk of an extensible-array index as HDF5 2.0.0 reports it, where it is.

    The index numbers chunks with the unlimited dimension slowest, then the others in order
    (``n = g[u] * P + C-order position of the others``, P the number of chunks across their largest
    sides, ``maxshape``). That version turns the number back into grid coordinates in the dimensions' own
    order, taking the unlimited dimension as endless: the dimensions before it come out 0, it takes
    ``n // (chunks across the later ones)``, the later ones the rest. The number is recovered from those,
    then read the index's way."""
    across = [-(-(n or 0) // c) for n, c in zip(maxshape, chunks, strict=True)]
    grid = [int(o) // c for o, c in zip(origin, chunks, strict=True)]
    number = 0
    for d in range(unlimited, len(grid)):
        number = number * (across[d] if d > unlimited else 1) + grid[d]
    others = [d for d in range(len(grid)) if d != unlimited]
    place = [0] * len(grid)
    for d in reversed(others):
        number, place[d] = divmod(number, across[d])
    place[unlimited] = number
    return tuple(p * c for p, c in zip(place, chunks, strict=True))


@functools.cache
def _extensible_array_origins() -> str:
    """How h5py's HDF5 library reports the chunk origins of a dataset with one unlimited dimension, not
    the first: "as they are", "unlimited first" (HDF5 2.0.0: the grid coordinates in the index's order)
    or "unknown". Found by asking it about chunks written at known places of a dataset in memory."""
    import h5py

    Probe = tuple[tuple[int, ...], tuple[int | None, ...], tuple[int, ...], list[tuple[int, ...]]]
    probes: list[Probe] = [  # (shape, largest, chunks, chunk origins written)
        ((4, 6, 6), (8, None, 10), (2, 3, 2), [(2, 0, 0), (0, 3, 4), (2, 3, 2)]),
        ((2, 4, 3, 4), (2, 6, None, 4), (1, 2, 1, 2), [(1, 2, 0, 0), (0, 0, 2, 2), (1, 0, 1, 2)]),
    ]
    found = set()
    for shape, largest, chunks, written in probes:
        with h5py.File(io.BytesIO(), "w", libver="latest") as f:
            data = f.create_dataset("d", shape=shape, chunks=chunks, maxshape=largest, dtype="u1")
            for origin in written:
                data[tuple(slice(o, o + c) for o, c in zip(origin, chunks, strict=True))] = 1
            reported = sorted(tuple(data.id.get_chunk_info(i).chunk_offset) for i in range(len(written)))
        unlimited = largest.index(None)
        if reported == sorted(written):
            found.add("as they are")
        elif sorted(_unlimited_put_back(o, chunks, largest, unlimited) for o in reported) == sorted(written):
            found.add("unlimited first")
        else:
            found.add("unknown")
    return found.pop() if len(found) == 1 else "unknown"


DONT_FILTER_PARTIAL_CHUNKS = 0x0002
"""The chunk option (``H5Pset_chunk_opts``) by which a dataset stores its partial edge chunks unfiltered,
with a filter mask that does not say so."""


@functools.cache
def _hdf5_candidates() -> tuple[ctypes.CDLL, ...]:
    """The HDF5 C libraries this process may have loaded (h5py's own first; netCDF4 brings another)."""
    import h5py

    package = os.path.dirname(h5py.__file__)
    paths = glob.glob(os.path.join(package, "..", "h5py.libs", "libhdf5-*"))
    paths += glob.glob(os.path.join(package, ".dylibs", "libhdf5.*"))
    if os.path.exists("/proc/self/maps"):
        with open("/proc/self/maps") as maps:
            paths += [line.split()[-1] for line in maps if "/libhdf5" in line and "libhdf5_hl" not in line]
    libraries = []
    for path in dict.fromkeys(paths):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(library, "H5Pget_chunk_opts") and hasattr(library, "H5Iis_valid"):
            libraries.append(library)
    return tuple(libraries)


def _hdf5_library(identifier: int):
    """The HDF5 C library h5py runs on (ctypes), for the one property h5py does not expose: the one that
    knows h5py's ``identifier``. None where none is found."""
    for library in _hdf5_candidates():
        if library.H5Iis_valid(ctypes.c_int64(identifier)) > 0:
            return library
    return None


def edge_chunks_unfiltered(plist) -> bool:
    """Whether a chunked dataset's creation properties store partial edge chunks unfiltered."""
    library = _hdf5_library(plist.id)
    if library is None:
        return False
    options = ctypes.c_uint(0)
    if library.H5Pget_chunk_opts(ctypes.c_int64(plist.id), ctypes.byref(options)) < 0:
        return False
    return bool(options.value & DONT_FILTER_PARTIAL_CHUNKS)


def _mark_edge_chunks_unfiltered(table: np.ndarray, shape, chunk_shape) -> None:
    """Set every filter's bit in the mask of each chunk that reaches past the dataset's end."""
    ndim = len(shape)
    partial = ((table[:, :ndim] + np.array(chunk_shape, np.uint64)) > np.array(shape, np.uint64)).any(axis=1)
    table[partial, ndim + 2] = 0xFFFFFFFF


def engine_array(path: str, data, name: str) -> _engine.ChunkedFileArray:
    """The engine's reader of h5py dataset ``data`` (named ``name``) in file ``path``."""
    import h5py

    if 0 in data.shape:
        raise InvalidInputError(
            f"{path}: dataset {name} has shape {tuple(data.shape)}: no values, and cubeslab reads arrays of "
            "at least one"
        )
    native = data.dtype.newbyteorder("=")
    if native.name not in _engine.dtypes():
        raise InvalidInputError(f"{path}: dataset {name} holds {data.dtype}, a type cubeslab does not read")
    big_endian = data.dtype.byteorder == ">" or (data.dtype.byteorder == "=" and np.little_endian is False)
    fill = np.array(data.fillvalue if data.fillvalue is not None else 0, dtype=data.dtype).tobytes()
    common = (path, name, list(data.shape), native.name, big_endian, fill)
    plist = data.id.get_create_plist()
    layout = plist.get_layout()
    if layout == h5py.h5d.COMPACT:
        raise InvalidInputError(
            f"{path}: dataset {name} is stored compact (inside its header, at most 64 KiB), which cubeslab "
            "does not read in place; read it with h5py, or ingest the file"
        )
    if layout == h5py.h5d.CONTIGUOUS:
        offset = data.id.get_offset()
        if offset is not None:
            return _engine.ChunkedFileArray(*common, offset=offset)
        # Never written: one chunk of the whole shape, absent, so every read gives the fill value.
        return _engine.ChunkedFileArray(*common, chunk_shape=list(data.shape))
    filters = []
    for i in range(plist.get_nfilters()):
        code, _flags, values, filter_name = plist.get_filter(i)
        filters.append((int(code), [int(v) for v in values], filter_name.decode(errors="replace")))
    table = chunk_table(path, name, data)
    if filters and edge_chunks_unfiltered(plist):
        _mark_edge_chunks_unfiltered(table, data.shape, data.chunks)
    return _engine.ChunkedFileArray(*common, chunk_shape=list(data.chunks), filters=filters, chunks=table)


class Hdf5Array(Array):
    """A dataset of an HDF5 file (``dataset="/group/name"``) or a variable of a NetCDF 4 file
    (``variable="name"``), read in place, in parallel, by the engine. Read-only.

    Without either, the file's only N-D numeric dataset is taken (else the error lists them).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        dataset: str | None = None,
        settings: ReadSettings | None = None,
        *,
        variable: str | None = None,
    ):
        if dataset is not None and variable is not None:
            raise InvalidInputError("give dataset= (HDF5) or variable= (NetCDF 4), not both")
        self.path = os.fspath(path)
        self.settings = settings or ReadSettings()
        self.copies = []
        self.writable = False
        flag = "variable=" if variable is not None else "dataset="
        if variable is not None and os.path.isfile(self.path) and not is_hdf5_file(self.path):
            raise InvalidInputError(
                f"{self.path}: not a NetCDF 4 file (classic NetCDF has no chunks to read in place); "
                "ingest it with cubeslab ingest, which reads it through netCDF4"
            )
        f, data, name = open_dataset(
            self.path, variable if variable is not None else dataset, flag=flag, variable=variable is not None
        )
        with f:
            self.dataset = name
            self._chunks = tuple(data.chunks) if data.chunks else tuple(data.shape)
            # The file that holds the bytes: another one when `name` is an external link.
            self._engine = engine_array(data.file.filename, data, name)  # type: ignore[assignment]
            self.shape = tuple(self._engine.shape)
            self.dtype = np.dtype(self._engine.dtype)
            axes = dataset_axes(data)
            self.metadata = {
                "shape": list(self.shape),
                "data_type": self.dtype.name,
                "dimension_names": [a["name"] for a in axes],
                "attributes": dataset_attributes(data),
                "source": {"file": self.path, "dataset": name, "chunks": data.chunks},
            }

    def source_for(self, window=()) -> str:
        return self.path

    def write(self, window, values=WHOLE_ARRAY, *, casting: str = "same_kind") -> None:
        raise InvalidInputError(
            f"{self.path}: dataset {self.dataset} is read in place and read-only; ingest it to write"
        )

    @property
    def chunks(self) -> tuple[int, ...]:
        """The file's chunk shape (the whole shape for a contiguous dataset)."""
        return self._chunks

    @property
    def shards(self) -> None:
        return None

    @property
    def stored_chunks(self) -> int:
        """Chunks stored in the file (the others hold the fill value)."""
        return self._engine.stored_chunks  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return (
            f"<cubeslab.Hdf5Array {self.path!r} dataset={self.dataset!r} shape={self.shape} "
            f"dtype={self.dtype} chunks={self.chunks}>"
        )

    def __getstate__(self) -> dict:
        return {"path": self.path, "dataset": self.dataset, "settings": self.settings}

    def __setstate__(self, state: dict) -> None:
        Hdf5Array.__init__(self, state["path"], state["dataset"], state["settings"])
