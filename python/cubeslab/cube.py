"""`Cube`: a survey store opened for reading — amplitudes by index or by
survey label, coordinates, trace headers, and xarray / dask views."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from . import _engine, schema
from .array import WHOLE_ARRAY, Array, ReadSettings, is_whole
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
from .schema import store_contents
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


def _is_scalar(key) -> bool:
    return not isinstance(key, (slice, list, tuple, np.ndarray)) or (
        isinstance(key, np.ndarray) and key.ndim == 0
    )


def _shown(value) -> str:
    """A label or position as a message shows it: ``111``, ``5.0`` (not ``np.int64(111)``), ``'x'``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(float(value))
    return repr(value)


def _refuse_tuple(name: str, key: tuple) -> SelectionError:
    return SelectionError(
        f"{name}[{', '.join(map(_shown, key))}]: a tuple here would be segyio's (line, offset) selection, "
        f"which cubeslab does not offer; pass a list for several {name} planes, "
        f"{name}[[{', '.join(map(_shown, key))}]], or index the cube by position"
    )


def _read_planes(cube: Cube, dim: int, positions: np.ndarray) -> np.ndarray:
    """The planes at ``positions`` along ``dim``, stacked along a new first axis.

    Evenly spaced positions are read in one engine call (a strided window, its
    axis then moved first: a view, not a copy); others plane by plane.
    """
    positions = np.asarray(positions, dtype=np.int64)
    plane_shape = tuple(n for d, n in enumerate(cube.shape) if d != dim)
    key: list[slice | int] = [slice(None)] * cube.ndim
    steps = np.diff(positions)
    if positions.size == 0:
        return np.empty((0, *plane_shape), dtype=cube.dtype)
    if positions.size == 1 or (steps[0] != 0 and bool((steps == steps[0]).all())):
        first, last = int(positions[0]), int(positions[-1])
        step = int(steps[0]) if positions.size > 1 else 1
        stop = last + (1 if step > 0 else -1)
        key[dim] = slice(first, stop if stop >= 0 else None, step)
        return np.moveaxis(cube.amplitude.read(tuple(key)), dim, 0)
    out = np.empty((positions.size, *plane_shape), dtype=cube.dtype)
    for row, position in zip(out, positions, strict=True):
        key[dim] = int(position)
        cube.amplitude.read(tuple(key), out=row)
    return out


class LabelAxis:
    """Planes selected by survey label along one dimension, as segyio's ``f.iline``.

    Labels are the survey's numbers (inline, crossline, offset) or sample times
    / depths in ms or m, not positions; ``labels`` lists them. A key is:

    - one label: ``cube.inline[2400]`` gives one plane (``ndarray``);
    - a slice of labels: ``cube.inline[2400:2410:2]`` gives the planes whose
      labels are in ``range(2400, 2410, 2)`` and exist, as segyio's
      ``f.iline[2400:2410:2]`` yields them (stop exclusive, step in label
      units, a negative step runs backwards, an omitted start or stop means
      the first or last label, labels the survey lacks are skipped). Exactly
      as in segyio, the range is ``range(*key.indices(last + 1))``: a
      negative bound counts back from the last label + 1 (``[-5:]`` is the
      last five label numbers) and a start past the last label steps back
      from the last one (in surveys with negative labels bounds are plain
      labels instead);
    - on the sample axis (``cube.time_slice``), or any axis whose labels are
      not whole numbers, a slice of values ``[t0:t1:step]`` gives the planes
      with ``t0 <= t < t1`` (as xarray's ``.sel``); the step, in label units,
      must be a multiple of the label interval and counts from the first
      plane selected;
    - a list (or array) of labels: those planes, each of which must exist.

    Several planes come back stacked in one ``ndarray`` whose first axis runs
    over the selected labels (``numpy.stack`` of what segyio yields one by one),
    read in one call when they are evenly spaced. A label the survey does not
    have raises :class:`~cubeslab.LabelError`.
    """

    def __init__(self, cube: Cube, dim: int):
        self._cube, self._dim = cube, dim
        self.name = cube.dims[dim]
        self.labels: np.ndarray = cube.coords[self.name]

    def _range_text(self) -> str:
        labels = self.labels
        if labels.size == 0:
            return f"this survey has no {self.name} values"
        if is_text(labels):
            shown = ", ".join(map(repr, labels[:8].tolist())) + (", ..." if labels.size > 8 else "")
            return f"its {self.name} labels are {shown} ({labels.size} labels)"
        spacing = np.diff(labels)
        step = f", step {_shown(spacing[0])}" if spacing.size and np.allclose(spacing, spacing[0]) else ""
        first, last = _shown(labels[0]), _shown(labels[-1])
        return f"its {self.name} values run {first}..{last} ({labels.size} values{step})"

    def index(self, label) -> int:
        """Position of ``label`` along the axis."""
        if not _is_scalar(label):
            raise SelectionError(f"{self.name} index: {_shown(label)} is not one label")
        if isinstance(label, (bool, np.bool_)) and self.labels.dtype.kind != "b":
            raise SelectionError(
                f"{self.name} index: {label} is a truth value, not a label; {self._range_text()}"
            )
        if self.labels.dtype.kind == "f":
            try:
                tolerance = 1e-6 * max(1.0, abs(float(label)))
            except (TypeError, ValueError):
                tolerance = None
            hits = (
                np.flatnonzero(np.isclose(self.labels, label, rtol=0, atol=tolerance))
                if tolerance is not None
                else np.empty(0, dtype=np.intp)
            )
        else:
            hits = np.flatnonzero(self.labels == label)
        if hits.size == 0:
            raise LabelError(
                f"{self._cube.path}: {self.name} {_shown(label)} is not in this survey: {self._range_text()}"
            )
        return int(hits[0])

    def positions(self, key) -> np.ndarray:
        """Positions along the axis of the planes ``key`` selects (a label, slice or list), in order."""
        if isinstance(key, slice):
            if is_text(self.labels):
                return self._text_positions(key)
            if self._dim == self._cube.ndim - 1 or self.labels.dtype.kind == "f":
                return self._sample_positions(key)
            return self._line_positions(key)
        if isinstance(key, tuple):
            raise _refuse_tuple(self.name, key)
        if _is_scalar(key):
            return np.array([self.index(key)], dtype=np.int64)
        return np.array([self.index(label) for label in key], dtype=np.int64)

    def _bounds(self, key: slice, integral: bool) -> tuple:
        values = (key.start, key.stop, key.step)
        for value in values:
            if value is None:
                continue
            ok = (
                isinstance(value, (int, np.integer))
                if integral
                else isinstance(value, (int, float, np.number))
            )
            if isinstance(value, bool) or not ok:
                kind = "integers" if integral else "numbers"
                raise SelectionError(
                    f"{self.name}[{key.start}:{key.stop}:{key.step}]: slice bounds must be {kind} or omitted"
                )
        if key.step is not None and key.step == 0:
            raise SelectionError(f"{self.name} slice step cannot be zero")
        return values

    def _text_positions(self, key: slice) -> np.ndarray:
        """A slice of text labels: from the start label up to the stop label (not included), every ``step``
        positions, as a list of them slices."""
        if key.step is not None and (not isinstance(key.step, (int, np.integer)) or key.step == 0):
            raise SelectionError(f"{self.name} slice step must be a whole number of labels, not {key.step!r}")
        start = None if key.start is None else self.index(key.start)
        stop = None if key.stop is None else self.index(key.stop)
        return np.arange(self.labels.size, dtype=np.int64)[slice(start, stop, key.step)]

    def _line_positions(self, key: slice) -> np.ndarray:
        """segyio's line slice of whole-number labels: those in ``range(start, stop, step)`` that exist,
        in its order."""
        start, stop, step = self._bounds(key, integral=True)
        step = 1 if step is None else step
        values = self.labels.astype(np.int64)
        if values.size == 0:
            return np.empty(0, dtype=np.int64)
        if start is None:
            start = values.min() if step > 0 else values.max()
        if values.min() >= 0:
            # segyio's model: labels index a list 0..last, sliced as Python slices a list (a negative
            # bound counts back from last + 1, a start past the last label steps back from the last)
            start, stop, step = slice(int(start), stop, step).indices(int(values.max()) + 1)
        if step > 0:
            inside = values >= start
            if stop is not None:
                inside &= values < stop
        else:
            inside = values <= start
            if stop is not None:
                inside &= values > stop
        inside &= (values - start) % step == 0
        return self._ordered(np.flatnonzero(inside), step)

    def _sample_positions(self, key: slice) -> np.ndarray:
        """Samples with ``t0 <= t < t1`` (``t0 >= t > t1`` with a negative step), every ``step``."""
        start, stop, step = self._bounds(key, integral=False)
        values = self.labels.astype(np.float64)
        if values.size == 0:
            return np.empty(0, dtype=np.int64)
        forward = step is None or step > 0
        tolerance = 1e-6 * max(1.0, float(np.abs(values).max()))
        inside = np.ones(values.shape, dtype=bool)
        if start is not None:
            inside &= values >= start - tolerance if forward else values <= start + tolerance
        if stop is not None:
            inside &= values < stop - tolerance if forward else values > stop + tolerance
        positions = self._ordered(np.flatnonzero(inside), -1 if not forward else 1)
        if step is None:
            return positions
        spacing = np.diff(values)
        if spacing.size and np.allclose(spacing, spacing[0], rtol=1e-6, atol=tolerance):
            ratio = abs(step) / abs(spacing[0])
            if abs(ratio - round(ratio)) > 1e-6 * max(1.0, ratio) or round(ratio) == 0:
                raise SelectionError(
                    f"{self.name} slice step {step:g} is not a multiple of the sample interval "
                    f"{abs(spacing[0]):g}"
                )
        if positions.size == 0:
            return positions
        units = (values[positions] - values[positions[0]]) / step
        return positions[np.abs(units - np.round(units)) <= 1e-6 * max(1.0, float(np.abs(units).max()))]

    def _ordered(self, positions: np.ndarray, step) -> np.ndarray:
        order = np.argsort(self.labels[positions], kind="stable")
        return positions[order[::-1] if step < 0 else order].astype(np.int64)

    def __getitem__(self, key) -> np.ndarray:
        if _is_scalar(key):
            index: list[slice | int] = [slice(None)] * self._cube.ndim
            index[self._dim] = self.index(key)
            return self._cube.amplitude.read(tuple(index))
        return _read_planes(self._cube, self._dim, self.positions(key))

    def __iter__(self):
        return (self[label] for label in self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return f"<{self.name} planes: {len(self)} labels>"


class PositionAxis:
    """Planes selected by position (0-based index) along one dimension, as segyio's ``f.depth_slice``.

    ``cube.depth_slice[k]`` is the horizontal plane of the k-th sample (``k``
    counts from 0; negative counts from the end), whatever its time or depth:
    segyio's meaning. A slice (Python semantics: ``[10:20:2]``, ``[::-1]``) or
    a list of positions gives the planes stacked along a new first axis. For a
    sample *time* in ms use ``cube.time_slice[t]``.
    """

    def __init__(self, cube: Cube, dim: int, name: str):
        self._cube, self._dim, self.name = cube, dim, name

    def __len__(self) -> int:
        return self._cube.shape[self._dim]

    def _position(self, index) -> int:
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise SelectionError(
                f"{self.name}[{_shown(index)}]: {self.name} takes sample positions (integers from 0), as "
                f"in segyio; for a sample time or depth use time_slice[{_shown(index)}]"
            )
        n = len(self)
        position = int(index) + n if index < 0 else int(index)
        if not 0 <= position < n:
            raise SelectionError(f"{self.name} index {int(index)} is out of range: {n} samples (0..{n - 1})")
        return position

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            try:
                positions = np.arange(len(self))[key]
            except TypeError:
                raise SelectionError(
                    f"{self.name}[{key.start}:{key.stop}:{key.step}]: slice bounds must be integers"
                ) from None
            return _read_planes(self._cube, self._dim, positions)
        if isinstance(key, tuple):
            raise SelectionError(
                f"{self.name} takes one position, a slice or a list of positions, not a tuple"
            )
        if isinstance(key, (list, np.ndarray)) and np.ndim(key) > 0:
            return _read_planes(self._cube, self._dim, np.array([self._position(k) for k in key]))
        index: list[slice | int] = [slice(None)] * self._cube.ndim
        index[self._dim] = self._position(key.item() if isinstance(key, np.ndarray) else key)
        return self._cube.amplitude.read(tuple(index))

    def __iter__(self):
        return (self[k] for k in range(len(self)))

    def __repr__(self) -> str:
        return f"<{self.name}: {len(self)} planes by position>"


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
        return LabelAxis(self, self.dims.index(dim))

    @property
    def inline(self) -> LabelAxis:
        return LabelAxis(self, 0)

    @property
    def crossline(self) -> LabelAxis:
        return LabelAxis(self, 1)

    @property
    def time_slice(self) -> LabelAxis:
        """Horizontal planes keyed by sample time in ms (depth for depth surveys): labels, not positions."""
        return LabelAxis(self, self.ndim - 1)

    @property
    def depth_slice(self) -> PositionAxis:
        """Horizontal planes keyed by sample *position* (0-based), as segyio's ``f.depth_slice``.

        ``cube.depth_slice[k]`` is ``cube.time_slice[cube.coords[cube.vertical][k]]``; it takes
        integers, slices and lists of positions, never times.
        """
        return PositionAxis(self, self.ndim - 1, "depth_slice")

    def trace(self, *labels) -> np.ndarray:
        """One trace (or, pre-stack, one gather if the offset is left out) by survey labels:
        ``cube.trace(inline, crossline[, offset])``, like segyio's ``f.gather[il, xl]``.

        It is called, not indexed: segyio's ``f.trace[i]`` (the i-th trace of the file) has no
        counterpart here, so ``cube.trace[i]`` fails rather than meaning something else.
        """
        if not 1 <= len(labels) < self.ndim:
            names = ", ".join(self.dims[:-1])
            raise SelectionError(f"trace takes 1 to {self.ndim - 1} labels ({names}); got {len(labels)}")
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
