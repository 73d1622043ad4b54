"""`Cube`: a survey store opened for reading — amplitudes by index or by
survey label, coordinates, trace headers, and xarray / dask views."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .array import Array, ReadSettings
from .errors import IncompleteStoreError, InvalidInputError, LabelError, StoreNotFoundError
from .trace_fields import FIELD_BY_BYTE, TRACE_FIELDS

VERTICAL_NAMES = ("time", "depth", "sample")


def _read_node(path: Path) -> dict:
    file = path / "zarr.json"
    try:
        node = json.loads(file.read_bytes())
    except (FileNotFoundError, NotADirectoryError):
        raise StoreNotFoundError(f"{path}: no Zarr store here (no zarr.json)") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise InvalidInputError(f"{file}: invalid metadata: not valid JSON: {error}") from None
    if not isinstance(node, dict):
        raise InvalidInputError(f"{file}: invalid metadata: not a JSON object but a {type(node).__name__}")
    return node


class LabelAxis:
    """Planes selected by a survey label along one dimension: ``cube.inline[2400]``.

    Labels are the survey's numbers (inline, crossline, offset) or sample
    times / depths in ms or m, not positions; ``labels`` lists them.
    """

    def __init__(self, cube: Cube, dim: int):
        self._cube, self._dim = cube, dim
        self.name = cube.dims[dim]
        self.labels: np.ndarray = cube.coords[self.name]

    def index(self, label) -> int:
        """Position of ``label`` along the axis."""
        if self.labels.dtype.kind == "f":
            hits = np.flatnonzero(np.isclose(self.labels, label, rtol=0, atol=1e-6 * max(1.0, abs(label))))
        else:
            hits = np.flatnonzero(self.labels == label)
        if hits.size == 0:
            lo, hi = (self.labels[0], self.labels[-1]) if self.labels.size else (None, None)
            raise LabelError(
                f"{self.name} {label} is not in this survey ({self.labels.size} values, {lo}..{hi})"
            )
        return int(hits[0])

    def __getitem__(self, label) -> np.ndarray:
        key: list[slice | int] = [slice(None)] * self._cube.ndim
        key[self._dim] = self.index(label)
        return self._cube.amplitude.read(tuple(key))

    def __iter__(self):
        return (self[label] for label in self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return f"<{self.name} planes: {len(self)} labels>"


class Headers:
    """Trace header fields over the trace dimensions: ``cube.headers["CDP_X"]``.

    Keys are segyio ``TraceField`` names (``"INLINE_3D"``, ``"offset"``, ...)
    or 1-based byte positions; ``cdp_x`` / ``cdp_y`` give the scaled
    coordinates. Values are decoded from the stored raw 240-byte headers.
    """

    def __init__(self, cube: Cube):
        self._cube = cube

    def keys(self) -> list[str]:
        return ["cdp_x", "cdp_y", *TRACE_FIELDS]

    def __getitem__(self, field) -> np.ndarray:
        cube = self._cube
        if field in ("cdp_x", "cdp_y"):
            return cube._array(field)[...]
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
        raw = cube._array("raw_headers")
        endian = ">" if raw.attributes.get("endianness", "big") == "big" else "<"
        data = raw[..., byte - 1 : byte - 1 + size]
        return np.ascontiguousarray(data).view(f"{endian}i{size}")[..., 0].astype(np.int32)


class Cube:
    """A seismic survey (or any N-D array) in a Zarr v3 store.

    Open with :func:`cubeslab.open`. Index with numpy syntax (positions) or
    through the label axes (survey numbers)::

        with cubeslab.open("survey.zarr") as cube:
            cube.inline[2400]          # by inline number
            cube.crossline[1100]       # by crossline number
            cube.time_slice[1200.0]    # by sample time (ms)
            cube.trace(2400, 1100)
            cube[10:20, 5, ::2]        # by position

    Creating a Cube reads only metadata and the small coordinate arrays; its
    ``repr`` reads nothing.
    """

    def __init__(self, path: str | os.PathLike, settings: ReadSettings | None = None):
        self.path = Path(path)
        self.settings = settings or ReadSettings()
        node = _read_node(self.path)
        self._arrays: dict[str, Array] = {}
        if node.get("node_type") == "array":
            self.attributes: dict = {}
            self.amplitude = Array(self.path, self.settings)
        else:
            self.attributes = node.get("attributes", {})
            state = self.attributes.get("cubeslab", {}).get("state")
            if state not in (None, "complete"):
                raise IncompleteStoreError(
                    f"{self.path}: store is incomplete (state '{state}'): the ingest that wrote it did "
                    "not finish; continue it with --resume (same source and options) or start again "
                    "with --overwrite"
                )
            name = self.attributes.get("attributes", {}).get("defaultVariableName", "amplitude")
            views = self.attributes.get("cubeslab", {}).get("views", {})
            copies = [self.path / view["array"] for view in views.values()]
            self.amplitude = Array(self.path / name, self.settings, copies)
            self._arrays[name] = self.amplitude
        self.dims: list[str] = list(self.amplitude.dimension_names or [f"dim_{i}" for i in range(self.ndim)])
        self.coords: dict[str, np.ndarray] = {}
        for dim, n in zip(self.dims, self.shape, strict=True):
            coord = self.path / dim
            is_survey = node.get("node_type") == "group" and (coord / "zarr.json").is_file()
            self.coords[dim] = self._array(dim)[...] if is_survey else np.arange(n)
            if self.coords[dim].shape != (n,):
                raise InvalidInputError(
                    f"{coord}: coordinate array has shape {self.coords[dim].shape}, "
                    f"but the amplitude array has {n} {dim} values"
                )

    def _array(self, name: str) -> Array:
        if name not in self._arrays:
            self._arrays[name] = Array(self.path / name, self.settings)
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
        return LabelAxis(self, self.dims.index(dim))

    @property
    def inline(self) -> LabelAxis:
        return LabelAxis(self, 0)

    @property
    def crossline(self) -> LabelAxis:
        return LabelAxis(self, 1)

    @property
    def time_slice(self) -> LabelAxis:
        """Horizontal planes keyed by sample time (or depth for depth surveys)."""
        return LabelAxis(self, self.ndim - 1)

    depth_slice = time_slice

    def trace(self, *labels) -> np.ndarray:
        """One trace (or, pre-stack, one gather if the offset is left out) by survey labels."""
        key = tuple(LabelAxis(self, d).index(label) for d, label in enumerate(labels))
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
        if (self.path / "trace_mask" / "zarr.json").is_file():
            return self._array("trace_mask")[...]
        return np.ones(self.shape[:-1], dtype=bool)

    def _file_header_attributes(self) -> dict:
        node = self.path / "segy_file_header"
        return _read_node(node).get("attributes", {}) if (node / "zarr.json").is_file() else {}

    @property
    def text_header(self) -> str:
        return self._file_header_attributes().get("textHeader", "")

    @property
    def binary_header(self) -> dict:
        header = self._file_header_attributes().get("binaryHeader", {})
        return header if isinstance(header, dict) else {}

    # -- other views ---------------------------------------------------------
    def to_xarray(self):
        """A lazy, labelled ``xarray.Dataset`` (needs the ``xarray`` extra)."""
        from .adapters import to_xarray

        return to_xarray(self)

    def to_dask(self, chunks=None):
        """The amplitudes as a ``dask.array`` (default chunks: the shard shape)."""
        from .adapters import to_dask

        return to_dask(self.amplitude, chunks)

    # -- lifetime ------------------------------------------------------------
    def close(self) -> None:
        """Drop open arrays (their shard maps close with them)."""
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


def open(path: str | os.PathLike, *, threads=None, in_flight=None, verify: bool = True) -> Cube:
    """Open a cube store (cubeslab, MDIO v1, or a plain Zarr v3 array)."""
    return Cube(path, ReadSettings(threads=threads, in_flight=in_flight, verify=verify))
