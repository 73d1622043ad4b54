"""`Cube`: a survey store opened for reading — amplitudes by index or by
survey label, coordinates, trace headers, and xarray / dask views."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from . import _engine, schema
from .array import WHOLE_ARRAY, Array, ReadSettings
from .errors import (
    InvalidInputError,
    LabelError,
    SelectionError,
    StoreChangedError,
)
from .labels import is_text, is_text_node, read_labels
from .locations import S3Path, storage_options_of, store_path
from .mdio import header_field, header_keys, struct_headers
from .overviews import fresh_levels
from .plane_axes import LabelAxis, PositionAxis
from .schema import store_contents
from .selection import is_whole
from .trace_fields import FIELD_BY_BYTE, TRACE_FIELDS

VERTICAL_NAMES = ("time", "depth", "sample")


def read_node(path: Path | S3Path) -> dict:
    """A node's ``zarr.json``."""
    node = json.loads(_engine.read_node(str(path), storage_options_of(path)))
    if not isinstance(node, dict):
        file = path / "zarr.json"
        raise InvalidInputError(f"{file}: invalid metadata: not a JSON object but a {type(node).__name__}")
    return node


READ_AHEAD_BYTES = 1 << 20
"""The most of each small file (metadata, a coordinate chunk) an open asks the kernel to read ahead."""


def _read_ahead(files) -> None:
    """Ask the kernel to start reading these local files now, all at once, so that a cold open waits for
    about one device round trip rather than one per file. A hint: a file missing here, or on S3, is
    skipped."""
    if not hasattr(os, "posix_fadvise"):  # not on macOS or Windows
        return
    for file in files:
        if not isinstance(file, Path):
            continue
        try:
            fd = os.open(file, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, READ_AHEAD_BYTES, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass  # a folder, or a file system without read-ahead
        finally:
            os.close(fd)


def _read_ahead_arrays(store: Path, main: Path, copies) -> None:
    """Read ahead what opening a survey store reads after its main array's metadata: its copies'
    metadata, and the coordinate arrays its dimensions name."""
    try:
        dims = json.loads((main / "zarr.json").read_bytes()).get("dimension_names") or []
    except (OSError, ValueError, AttributeError):
        dims = []  # the open itself reports a damaged document
    names = [dim for dim in dims if isinstance(dim, str)]
    coordinates = [store / dim / file for dim in names for file in ("zarr.json", "c/0")]
    _read_ahead([*(Path(copy) / "zarr.json" for copy in copies), *coordinates])


def _generation(array: Array) -> str | None:
    """The generation of the store that wrote ``array`` (every array of one store shares it)."""
    return array.metadata.get("attributes", {}).get("cubeslab", {}).get("generation")


class Headers:
    """Trace header fields over the trace dimensions: ``cube.headers["CDP_X"]``.

    Keys are segyio ``TraceField`` names (``"INLINE_3D"``, ``"offset"``, ...)
    or 1-based byte positions; ``cdp_x`` / ``cdp_y`` give the scaled
    coordinates. Values are decoded from the stored raw 240-byte headers; in
    an MDIO store, from its ``headers`` struct array, whose MDIO field names
    (``"source_coord_x"``, ``"inline"``, ...) work too, except that ``cdp_x`` /
    ``cdp_y`` stay the scaled coordinates (MDIO's raw fields are ``"CDP_X"`` /
    ``"CDP_Y"``).
    """

    def __init__(self, cube: Cube):
        self._cube = cube

    def keys(self) -> list[str]:
        mdio = struct_headers(self._cube.path)
        fields = TRACE_FIELDS if mdio is None else header_keys(mdio)
        return list(dict.fromkeys([schema.CDP_X, schema.CDP_Y, *fields]))

    def __getitem__(self, field) -> np.ndarray:
        cube = self._cube
        if field in (schema.CDP_X, schema.CDP_Y):
            return cube._array(field)[...]
        mdio = struct_headers(cube.path)
        if mdio is not None:  # an MDIO store: its "headers" struct array, by MDIO or segyio name
            return header_field(mdio, field)
        if not (isinstance(field, str) or is_whole(field)):
            raise LabelError(
                f"trace header field {field!r}: give a segyio TraceField name or a whole 1-based "
                "byte position"
            )
        if isinstance(field, str):
            if field not in TRACE_FIELDS:
                raise LabelError(
                    f"unknown trace header field {field!r}; see cubeslab.trace_fields.TRACE_FIELDS"
                )
            byte, size = TRACE_FIELDS[field]
        else:
            if int(field) not in FIELD_BY_BYTE:
                raise LabelError(f"no trace header field starts at byte {field}")
            byte, size = FIELD_BY_BYTE[int(field)]
        raw = cube._array(schema.RAW_HEADERS)
        endian = ">" if raw.attributes.get("endianness", "big") == "big" else "<"
        data = raw[..., byte - 1 : byte - 1 + size]
        return np.ascontiguousarray(data).view(f"{endian}i{size}")[..., 0].astype(np.int32)


class Coordinates(dict):
    """Each dimension's coordinates by name: a stored coordinate array's values, else its positions
    0..n-1, made each time they are asked for rather than kept (a long axis's would take gigabytes at every
    open)."""

    def __init__(self, sizes: dict[str, int]):
        super().__init__()
        self.sizes = sizes

    def __missing__(self, dim: str) -> np.ndarray:
        if dim not in self.sizes:
            raise KeyError(dim)
        return np.arange(self.sizes[dim])

    def __contains__(self, dim) -> bool:
        return dim in self.sizes

    def get(self, dim, default=None):
        return self[dim] if dim in self.sizes else default

    def ends(self, dim: str) -> tuple[float, float] | None:
        """The first and last coordinate of ``dim`` (None for an empty axis, or one labelled by text),
        without making positions."""
        if self.sizes[dim] == 0:
            return None
        if dim in self.keys():
            values = dict.__getitem__(self, dim)
            return None if is_text(values) else (float(values[0]), float(values[-1]))
        return 0.0, float(self.sizes[dim] - 1)


class Cube:
    """A seismic survey (or any N-D array) in a Zarr v3 store.

    Open with :func:`cubeslab.open`. Index with numpy syntax (positions) or
    through the label axes (survey numbers)::

        with cubeslab.open("survey.zarr") as cube:
            cube.inline[2400]            # by inline number
            cube.inline[2400:2410]       # inlines 2400..2409, stacked (as segyio's f.iline[2400:2410])
            cube.crossline[[1100, 1150]] # a list of crossline numbers, stacked
            cube.time_slice[1200.0]      # by sample time (ms)
            cube.depth_slice[300]        # by sample position (0-based), as segyio's f.depth_slice
            cube.trace(2400, 1100)       # by inline and crossline number
            cube[10:20, 5, ::2]          # by position

    Creating a Cube reads only metadata and the small coordinate arrays; its
    ``repr`` reads nothing.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        settings: ReadSettings | None = None,
        cache: int | str | None = None,
        storage_options: dict | None = None,
    ):
        self.path = store_path(path, storage_options)
        self.settings = settings or ReadSettings()
        contents = store_contents(self.path)
        self.attributes: dict = contents["attributes"]
        is_group = contents["node_type"] == "group"
        # The main array as a name of the store's own kind (a folder, or a URL with its connection).
        self._is_group, self._main_name = is_group, Path(contents["main"]).name
        main = self.path / self._main_name if is_group else self.path
        if is_group and isinstance(self.path, Path):
            _read_ahead_arrays(self.path, self.path / self._main_name, contents["copies"])
        self.amplitude = Array(main, self.settings, contents["copies"], cache=cache)
        if is_group:
            self.amplitude.find_overviews = self._fresh_overviews
        self._arrays: dict[str, Array] = {Path(contents["main"]).name: self.amplitude} if is_group else {}
        # Zarr allows a dimension without a name (null): numbered, as a store without names is.
        stored = self.amplitude.dimension_names
        names: list[str | None] = list(stored) if stored else [None] * self.ndim
        self.dims: list[str] = [n if isinstance(n, str) and n else f"dim_{i}" for i, n in enumerate(names)]
        self.coords = Coordinates(dict(zip(self.dims, self.shape, strict=True)))
        for dim, n in zip(self.dims, self.shape, strict=True):
            coord = self.path / dim
            if not self.has_coordinate_array(dim):
                continue  # its positions, made when asked for
            self.coords[dim] = self.stored_values(dim)
            if self.coords[dim].shape != (n,):
                raise InvalidInputError(
                    f"{coord}: coordinate array has shape {self.coords[dim].shape}, "
                    f"but the amplitude array has {n} {dim} values"
                )

    def has_coordinate_array(self, dim: str) -> bool:
        """Whether the store holds an array of ``dim``'s coordinates. A main array named like one of its
        dimensions is that dimension's coordinate only if it has no other (NetCDF's ``depth(depth)``, not
        its ``x(y, x)``); a name that is no folder of the store (``../a``) names none."""
        if not self._is_group or "/" in dim or "\\" in dim or dim in ("", ".", ".."):
            return False
        if dim == self._main_name:
            return self.dims == [dim]
        return (self.path / dim / "zarr.json").is_file()

    def stored_values(self, name: str) -> np.ndarray:
        """The values of the group's array ``name`` (a coordinate, ...), whole: numbers, or text labels."""
        node = self.path / name
        return read_labels(node) if is_text_node(read_node(node)) else self._array(name)[...]

    def stored_attributes(self, name: str) -> dict:
        """The attributes of the group's array ``name`` ({} for none)."""
        return read_node(self.path / name).get("attributes", {})

    def _fresh_overviews(self) -> list[tuple[tuple[int, ...], str]]:
        """The overview levels the group records now, if made from the main array's data as it is now
        (read again each time: a window write or a rebuild elsewhere changes them)."""
        main = self.path / Path(self.amplitude.path).name
        levels = fresh_levels(read_node(self.path).get("attributes", {}), read_node(main))
        return [(level.factors, os.fspath(self.path / level.name)) for level in levels]

    def _array(self, name: str) -> Array:
        if name not in self._arrays:
            array = Array(self.path / name, self.settings)
            # A store written before its file-header array recorded a generation has none there.
            if _generation(array) not in (None, _generation(self.amplitude)):
                # Opened after an overwrite swapped the store: it would pair one survey's
                # amplitudes with another's headers or mask.
                raise StoreChangedError(
                    f"{self.path}: the store was replaced while it was open (another ingest "
                    "overwrote it); open it again to read the new one"
                )
            self._arrays[name] = array
        return self._arrays[name]

    # -- shape ---------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.amplitude.shape

    @property
    def ndim(self) -> int:
        return self.amplitude.ndim

    @property
    def dtype(self) -> np.dtype:
        return self.amplitude.dtype

    @property
    def vertical(self) -> str:
        """Name of the sample axis (time or depth)."""
        return self.dims[-1]

    # -- access by label -----------------------------------------------------
    def axis(self, dim: str) -> LabelAxis:
        """Label-keyed planes along the named dimension."""
        if dim not in self.dims:
            raise LabelError(f"{self.path}: no axis {dim!r}; the axes are {', '.join(self.dims)}")
        return self._label_axis(self.dims.index(dim))

    def _label_axis(self, dim: int) -> LabelAxis:
        name = self.dims[dim]
        return LabelAxis(self.amplitude, dim, name, self.coords[name], self.path)

    @property
    def inline(self) -> LabelAxis:
        return self._label_axis(0)

    @property
    def crossline(self) -> LabelAxis:
        return self._label_axis(1)

    @property
    def time_slice(self) -> LabelAxis:
        """Horizontal planes keyed by sample time in ms (depth for depth surveys): labels, not positions."""
        return self._label_axis(self.ndim - 1)

    @property
    def depth_slice(self) -> PositionAxis:
        """Horizontal planes keyed by sample *position* (0-based), as segyio's ``f.depth_slice``.

        ``cube.depth_slice[k]`` is ``cube.time_slice[cube.coords[cube.vertical][k]]``; it takes
        integers, slices and lists of positions, never times.
        """
        return PositionAxis(self.amplitude, self.ndim - 1, "depth_slice")

    def trace(self, *labels) -> np.ndarray:
        """One trace (or, pre-stack, one gather if the offset is left out) by survey labels:
        ``cube.trace(inline, crossline[, offset])``, like segyio's ``f.gather[il, xl]``.

        It is called, not indexed: segyio's ``f.trace[i]`` (the i-th trace of the file) has no
        counterpart here, so ``cube.trace[i]`` fails rather than meaning something else.
        """
        if not 1 <= len(labels) < self.ndim:
            names = ", ".join(self.dims[:-1])
            raise SelectionError(f"trace takes 1 to {self.ndim - 1} labels ({names}); got {len(labels)}")
        key = tuple(self._label_axis(d).index(label) for d, label in enumerate(labels))
        return self.amplitude.read(key)

    # -- access by position --------------------------------------------------
    def __getitem__(self, key) -> np.ndarray:
        return self.amplitude.read(key)

    def read(self, window=(), out: np.ndarray | None = None, **settings) -> np.ndarray:
        """Read a window by position into ``out`` (see :meth:`Array.read`)."""
        return self.amplitude.read(window, out, **settings)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self.amplitude.__array__(dtype, copy)

    # -- survey metadata -----------------------------------------------------
    @property
    def headers(self) -> Headers:
        return Headers(self)

    @property
    def trace_mask(self) -> np.ndarray:
        """True where a trace exists; all True for a plain array."""
        if (self.path / schema.TRACE_MASK / "zarr.json").is_file():
            return self._array(schema.TRACE_MASK)[...]
        return np.ones(self.shape[:-1], dtype=bool)

    def _file_header_attributes(self) -> dict:
        node = self.path / schema.FILE_HEADER
        return read_node(node).get("attributes", {}) if (node / "zarr.json").is_file() else {}

    @property
    def text_header(self) -> str:
        return self._file_header_attributes().get("textHeader", "")

    @property
    def binary_header(self) -> dict:
        header = self._file_header_attributes().get("binaryHeader", {})
        return header if isinstance(header, dict) else {}

    # -- other views ---------------------------------------------------------
    def to_xarray(self, chunks=None):
        """The survey as a labelled ``xarray.Dataset`` read through the engine (needs the
        ``xarray`` extra): ``amplitude`` and ``trace_mask``, the coordinates (the sample axis
        with ``units``; ``cdp_x`` / ``cdp_y`` over the trace dimensions) and the store's attributes.

        ``chunks=None`` (default): lazy and numpy-backed, nothing read until values are asked for.
        ``chunks={}`` or ``"shards"``: dask-backed, one chunk per shard; a tuple (along the
        amplitude's dimensions), a dict per dimension, ``"auto"``: as ``xarray.open_dataset``.
        The same Dataset as ``xarray.open_dataset(path, engine="cubeslab", chunks=...)``.
        """
        import xarray as xr

        if isinstance(chunks, str) and chunks == "shards":
            chunks = {}
        elif isinstance(chunks, (tuple, list)):
            if len(chunks) != len(self.dims):
                raise SelectionError(
                    f"chunks={chunks!r}: give one size per dimension ({', '.join(self.dims)}), or a dict"
                )
            chunks = dict(zip(self.dims, chunks, strict=True))
        # The backend registered as "cubeslab" takes this open cube (its read settings kept);
        # xarray's own annotation names only paths, buffers and stores.
        return xr.open_dataset(self, engine="cubeslab", chunks=chunks)  # type: ignore[arg-type]

    def to_dask(self, chunks=None):
        """The amplitudes as a ``dask.array`` (default chunks: the shard shape)."""
        from .adapters import to_dask

        return to_dask(self.amplitude, chunks)

    # -- writing (a cube opened with mode="r+") --------------------------------
    def write(self, window, values=WHOLE_ARRAY, **options) -> None:
        """Write values into a window of the amplitudes, by position (see :meth:`Array.write`)."""
        self.amplitude.write(window, values, **options)

    def __setitem__(self, key, values) -> None:
        self.amplitude.write(key, values)

    def flush(self) -> None:
        """Write every change still in the cache to disk."""
        self.amplitude.flush()

    def refresh(self) -> bool:
        """See the shards other handles or processes replaced since this one read them (see
        :meth:`Array.refresh`). Whether any was replaced."""
        return self.amplitude.refresh()

    def cache_info(self) -> dict:
        """What the write cache did (see :meth:`Array.cache_info`)."""
        return self.amplitude.cache_info()

    # -- lifetime ------------------------------------------------------------
    def close(self) -> None:
        """Write pending changes, and drop open arrays (their shard maps close with them)."""
        self.amplitude.flush()
        self._arrays.clear()

    def __enter__(self) -> Cube:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        dims = ", ".join(f"{d}: {n}" for d, n in zip(self.dims, self.shape, strict=True))
        return (
            f"<cubeslab.Cube {str(self.path)!r} ({dims}) {self.dtype} "
            f"chunks={self.amplitude.chunks} shards={self.amplitude.shards}>"
        )
