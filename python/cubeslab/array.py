"""`Array`: any Zarr v3 array, read by the engine with numpy-style indexing."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import _engine
from .casting import CASTINGS, as_numbers, check_cast, check_overflow
from .errors import InvalidInputError, OptionError, SelectionError
from .locations import is_remote, storage_options_of, store_path
from .profiles import find_profile
from .selection import is_whole, normalize_key
from .sizes import parse_size


@dataclass(frozen=True)
class ReadSettings:
    """How reads run. ``None`` means the engine default (environment, then built-in).

    threads: worker threads (default: number of cores; env ``CUBESLAB_THREADS``).
    in_flight: byte-range requests handed to the kernel ahead of the workers
        (default 32; env ``CUBESLAB_IN_FLIGHT``).
    verify: check each chunk's crc32c (default on). Off, uncompressed chunks are
        read only where a selection touches them, which is faster for planes.
    """

    threads: int | None = None
    in_flight: int | None = None
    verify: bool = True

    def __post_init__(self) -> None:
        for name, value in (("threads", self.threads), ("in_flight", self.in_flight)):
            if value is not None and (not is_whole(value) or value < 1):
                raise OptionError(f"{name}={value!r}: give a whole number of 1 or more, or None")
        warn_over_limits(self.threads, self.in_flight)


def warn_over_limits(threads: int | None, in_flight: int | None, where: str = "") -> None:
    """Warn when ``threads`` or ``in_flight`` pass what the engine uses (it caps them: threads at four
    per core, beyond which more only contend)."""
    most_threads, most_in_flight = _engine.parallelism_limits()
    for name, value, most in (("threads", threads, most_threads), ("in_flight", in_flight, most_in_flight)):
        if value is not None and value > most:
            warnings.warn(
                f"{where}{name}={value} is more than cubeslab uses on this machine; using {most}",
                RuntimeWarning,
                stacklevel=4,
            )


def warn_over_limits_in_environment() -> None:
    """:func:`warn_over_limits` for ``CUBESLAB_THREADS`` and ``CUBESLAB_IN_FLIGHT``."""

    def number(name: str) -> int | None:
        text = os.environ.get(name, "").strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
        if text:  # the engine ignores it too; say so rather than run with a setting the user did not get
            warnings.warn(
                f"{name}={text!r} is not a whole number above 0; ignored", RuntimeWarning, stacklevel=3
            )
        return None

    threads, in_flight = number("CUBESLAB_THREADS"), number("CUBESLAB_IN_FLIGHT")
    warn_over_limits(threads, None, "CUBESLAB_THREADS: ")
    warn_over_limits(None, in_flight, "CUBESLAB_IN_FLIGHT: ")


WHOLE_ARRAY = object()
"""``write(values)``: no window given (None is a value, and refused as one)."""


ZARR_FLOAT_NAMES = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""How Zarr v3 metadata writes non-finite floats (JSON has no such numbers): fill values, and attributes."""


def zarr_fill_value(value):
    """A fill value as Zarr v3 metadata writes it: non-finite floats by name."""
    if isinstance(value, float) and not np.isfinite(value):
        return "NaN" if np.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def checked_fill_value(path, fill_value, dtype: np.dtype):
    """``fill_value`` for an array of ``dtype``, as Zarr v3 metadata writes it: a number of that type, or
    for floats a Zarr name (``"NaN"``, ``"Infinity"``) or bit pattern (``"0x7fc00000"``). Refused where
    the type would change it (beyond a float's rounding)."""
    value = fill_value
    bits = rf"0x[0-9a-fA-F]{{{2 * dtype.itemsize}}}"
    if isinstance(value, str) and dtype.kind == "f" and value in ZARR_FLOAT_NAMES:
        return value
    if isinstance(value, str) and dtype.kind == "f" and re.fullmatch(bits, value):
        value = np.array(int(value, 16), dtype=f"u{dtype.itemsize}").view(dtype)
    elif isinstance(value, str):  # a number written out ("-9999", "nan"), as numpy reads one
        for parse in (int, float):
            with contextlib.suppress(ValueError):
                value = parse(value)
                break
    given = np.asarray(value)
    if given.ndim != 0 or given.dtype.kind not in "biuf":
        raise InvalidInputError(f"{path}: fill_value {fill_value!r} is no value of the array's type, {dtype}")
    with np.errstate(invalid="ignore", over="ignore"):
        stored = given.astype(dtype)
    if dtype.kind == "f":
        changed = bool(np.isinf(stored)) and bool(np.isfinite(given))
    else:  # integers and bool hold a value exactly or not at all
        changed = not bool(np.isfinite(given)) or stored.item() != given.item()
    if changed:
        raise InvalidInputError(
            f"{path}: fill_value {fill_value!r} does not fit the array's type, {dtype} "
            f"(it would be stored as {stored.item()!r})"
        )
    return zarr_fill_value(stored.item())


def write_cache_limit(cache: int | str | None) -> int | None:
    """The write cache's bound in bytes (None: open to read only), from a size such as ``"512MiB"``."""
    if isinstance(cache, bool) or not isinstance(cache, (str, int, np.integer, type(None))):
        raise InvalidInputError(f"cache={cache!r}: give the write cache's size, e.g. '512MiB' or bytes")
    try:
        limit = parse_size(cache) if isinstance(cache, str) else cache
    except ValueError as error:
        raise InvalidInputError(f"cache={error}") from None
    if limit is not None and limit <= 0:
        raise InvalidInputError(f"cache={cache!r}: the write cache needs a positive number of bytes")
    if limit is not None and limit > LARGEST_COUNT:
        raise InvalidInputError(f"cache={cache!r}: more bytes than a 64-bit count holds")
    return None if limit is None else int(limit)


LARGEST_COUNT = 2**63 - 1
"""The largest count of bytes or elements the engine takes (a signed 64-bit integer's largest)."""


def checked_shape_and_type(path, shape, dtype) -> tuple[list[int], np.dtype]:
    """A new array's shape (whole, non-negative sides) and element type (one the engine stores)."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise InvalidInputError(f"{path}: dtype {dtype!r} is not a numpy type") from None
    if dtype.name not in _engine.dtypes():
        raise InvalidInputError(
            f"{path}: dtype {dtype} is not one cubeslab stores ({', '.join(_engine.dtypes())})"
        )
    sides = list(shape) if np.iterable(shape) and not isinstance(shape, (str, bytes)) else [shape]
    if not all(is_whole(n) and 0 <= n < 2**62 for n in sides):
        raise InvalidInputError(f"{path}: shape {shape!r} must list whole sizes from 0 to 2**62")
    if len(sides) > _engine.max_dims():  # 0-d arrays hold a NetCDF source's scalar coordinates
        raise InvalidInputError(
            f"{path}: shape {shape!r}: cubeslab stores at most {_engine.max_dims()} dimensions"
        )
    return [int(n) for n in sides], dtype


def zarr_json(value) -> str:
    """``value`` (metadata, attributes) as JSON text: non-finite floats named as :func:`zarr_fill_value`
    names them, since JSON has no NaN and the engine takes none."""

    def named(v, at: str = ""):
        if isinstance(v, dict):
            return {k: named(x, f"{at}[{k!r}]") for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [named(x, f"{at}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, np.ndarray):
            return named(v.tolist(), at)
        if isinstance(v, (float, np.floating)):
            return zarr_fill_value(float(v))
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            if not -(2**63) <= int(v) < 2**64:  # the engine's JSON holds 64-bit integers; more would round
                raise InvalidInputError(
                    f"{at}: {v} is beyond 64-bit integers, which JSON metadata holds exactly; "
                    "store it as text"
                )
            return int(v)
        if v is None or isinstance(v, str):
            return v
        raise InvalidInputError(
            f"{at}: {type(v).__name__} values cannot be stored as JSON metadata (numbers, text, lists and "
            "dicts can)"
        )

    return json.dumps(named(value), allow_nan=False)


class Array:
    """A Zarr v3 array on disk, read in parallel straight into numpy arrays.

    Indexing follows numpy's basic indexing and returns an ``ndarray``::

        a = cubeslab.Array("survey.zarr/amplitude")
        a[10]            # one inline
        a[:, 5, ::2]     # a crossline, every other sample

    ``copies``: arrays holding the same data in other layouts (orientation
    copies written by ``ingest --views``). Each read goes to the one the cost
    model predicts fastest for its window.

    ``cache`` (bytes, or a size such as ``"512MiB"``) opens the array for window
    writes (``a[10, :, 5:] = values``) through a write-back cache of decoded
    chunks bounded by it; :meth:`flush`, :meth:`close` or leaving a ``with``
    block writes the changes to disk.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        settings: ReadSettings | None = None,
        copies: Sequence[str | os.PathLike] = (),
        cache: int | str | None = None,
    ):
        self.path = os.fspath(path)
        self.storage_options = storage_options_of(path)  # an S3Path's connection, carried to other processes
        self.settings = settings or ReadSettings()
        self.copies = [os.fspath(c) for c in copies]
        limit = write_cache_limit(cache)
        self.writable = limit is not None
        if is_remote(self.path):
            self._engine = _engine.ZarrArray.remote(
                self.path, self.storage_options, limit, self.copies, self.settings.threads,
                self.settings.in_flight, self.settings.verify,
            )  # fmt: skip
        else:
            self._engine = _engine.ZarrArray(
                self.path,
                self.copies,
                find_profile(self.path) if self.copies else None,
                self.settings.threads,
                self.settings.in_flight,
                self.settings.verify,
                limit,
            )
        self.shape: tuple[int, ...] = tuple(self._engine.shape)
        self.dtype = np.dtype(self._engine.dtype)
        self.metadata: dict = json.loads(self._engine.metadata_json)
        # What finds the overview levels (downsampled copies) a covering read may use, as they are now:
        # (factors, path), finest first. A store's group sets it; a lone array has none.
        self.find_overviews: Callable[[], list[tuple[tuple[int, ...], str]]] = list

    @property
    def overviews(self) -> list[tuple[tuple[int, ...], str]]:
        """The overview levels made from this array's data as it is now: (factors, path), finest first.
        Empty while this handle holds changes not yet written back, which no level has seen."""
        if self.writable and self.cache_info()["dirty_bytes"] > 0:
            return []
        return self.find_overviews()

    def refresh(self) -> bool:
        """See the shards another handle or process has replaced since this handle read them (window
        writes, an overwrite): a handle keeps each shard it read mapped, and a handle open for writing its
        unchanged chunks cached, and reads that version until this is called. Whether any was replaced.
        (An array on object storage fetches its shards afresh.)"""
        return self._engine.forget_replaced_shards()

    def source_for(self, window=()) -> str:
        """Path of the array (this one or a copy) a read of ``window`` goes to."""
        (starts, stops, steps), _, _ = normalize_key(window, self.shape)
        return [self.path, *self.copies][self._engine.route(starts, stops, steps)]

    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        shape: Sequence[int],
        dtype,
        *,
        chunks: Sequence[int],
        shards: Sequence[int] | None = None,
        compress: str | None = None,
        dimension_names: Sequence[str] | None = None,
        attributes: dict | None = None,
        fill_value=None,
    ) -> Array:
        """Create an empty array. With ``shards``, chunks are inner chunks inside shards."""
        shape, dtype = checked_shape_and_type(path, shape, dtype)
        for name, sides in (("chunks", chunks), ("shards", shards)):
            if sides is not None and not (
                np.iterable(sides)
                and not isinstance(sides, (str, bytes))
                and all(is_whole(n) and n > 0 for n in sides)
            ):
                raise InvalidInputError(
                    f"{path}: {name}={sides!r}: give one positive whole size per dimension"
                )
        spec = {
            "shape": shape,
            "dtype": dtype.name,
            "chunk_shape": list(shards if shards is not None else chunks),
            "inner_chunks": list(chunks) if shards is not None else None,
            "compress": compress or "none",
            "attributes": attributes or {},
        }
        if dimension_names is not None:
            spec["dimension_names"] = list(dimension_names)
        if fill_value is not None:
            spec["fill_value"] = checked_fill_value(path, fill_value, dtype)
        _engine.ZarrArray.create(os.fspath(path), zarr_json(spec))
        return cls(path)

    @classmethod
    def from_numpy(cls, path: str | os.PathLike, data: np.ndarray, **create_options) -> Array:
        """Write ``data`` as a new array (see :meth:`create` for the options)."""
        array = cls.create(path, data.shape, data.dtype, **create_options)
        data = np.ascontiguousarray(data, dtype=array.dtype)
        # A new array, written whole: every chunk encoded and written in parallel, no cache.
        array._engine.write_array(data.reshape(-1).view(np.uint8), array.settings.threads)
        return array

    def write(self, window, values=WHOLE_ARRAY, *, casting: str = "same_kind") -> None:
        """Write ``values`` into ``window`` (a basic index, as for reading); ``write(values)``
        writes the whole array. Values broadcast to the window's shape (a scalar fills it).

        The array must be open for writing (``cache=``; a store opened with ``mode="r+"``).
        ``casting``: as numpy's, ``"same_kind"`` by default, so floats do not go into an integer array;
        integers must fit the array's type and finite floats must stay finite. Pass ``"unsafe"`` to
        convert anyway, as numpy's ``astype`` does.
        """
        if values is WHOLE_ARRAY:
            window, values = (), window
        if casting not in CASTINGS:
            raise InvalidInputError(f"casting={casting!r}: one of {', '.join(map(repr, CASTINGS))}")
        values = as_numbers(self.path, values, self.dtype)
        check_cast(self.path, values, self.dtype, casting)
        (starts, stops, steps), drop, reverse = normalize_key(window, self.shape)
        full_shape = tuple(len(range(a, b, s)) for a, b, s in zip(starts, stops, steps, strict=True))
        shape = tuple(n for d, n in enumerate(full_shape) if d not in drop)
        while values.ndim > len(shape) and values.shape[0] == 1:  # leading axes of one, as numpy drops them
            values = values[0]
        try:
            data = np.broadcast_to(values, shape)
        except ValueError:
            raise SelectionError(
                f"values of shape {values.shape} do not fit the window's shape {shape}"
            ) from None
        source = data.reshape(full_shape)
        with np.errstate(over="ignore"):  # an overflow is refused below, naming the value
            data = np.ascontiguousarray(source, dtype=self.dtype)
        check_overflow(self.path, source, data, casting)
        if reverse:
            data = np.ascontiguousarray(np.flip(data, axis=tuple(reverse)))
        if data.size == 0:
            return
        self._engine.write(starts, stops, steps, data.reshape(-1).view(np.uint8))

    def __setitem__(self, key, values) -> None:
        self.write(key, values)

    def flush(self) -> None:
        """Write every change still in the cache to disk."""
        if self.writable:
            self._engine.flush()

    def close(self) -> None:
        """Flush; the array stays open for reading."""
        self.flush()

    def __enter__(self) -> Array:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def cache_info(self) -> dict:
        """What the write cache did: ``hits``, ``misses``, ``evictions``, ``flushes`` (chunks written
        back), ``bytes`` and ``dirty_bytes`` held now, and the ``limit``."""
        return json.loads(self._engine.cache_info())

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def chunks(self) -> tuple[int, ...]:
        """Inner chunk shape (the unit of decoding), or the chunk shape of an unsharded array."""
        inner = self._engine.inner_chunk_shape
        return tuple(inner if inner is not None else self._engine.chunk_shape)

    @property
    def shards(self) -> tuple[int, ...] | None:
        """Shard shape (the unit of files), or ``None`` for an unsharded array."""
        return tuple(self._engine.chunk_shape) if self._engine.inner_chunk_shape is not None else None

    @property
    def dimension_names(self) -> list[str] | None:
        return self.metadata.get("dimension_names")

    @property
    def attributes(self) -> dict:
        return self.metadata.get("attributes", {})

    def read(
        self,
        window=(),
        out: np.ndarray | None = None,
        *,
        threads: int | None = None,
        in_flight: int | None = None,
        verify: bool | None = None,
        max_shape: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Read a window (a basic index: integers and slices) into ``out`` or a new array.

        ``out`` must be C-contiguous, writable, of the array's dtype and of the
        window's shape with integer-indexed dimensions kept as length 1 when
        given in that form, or dropped.

        ``max_shape`` (one size per dimension of the result, e.g. a screen's ``(h, w)``): read from the
        coarsest overview level (``cubeslab pyramid``) that still has at least that many samples across
        the window; the result is that level's, smaller than the window (see :meth:`overview_for`).
        """
        if max_shape is not None:
            level, window = self.overview_for(window, max_shape)
            return level.read(window, out, threads=threads, in_flight=in_flight, verify=verify)
        if threads is not None or in_flight is not None:
            warn_over_limits(threads, in_flight)
        (starts, stops, steps), drop, reverse = normalize_key(window, self.shape)
        full_shape = tuple(len(range(a, b, s)) for a, b, s in zip(starts, stops, steps, strict=True))
        shape = tuple(n for d, n in enumerate(full_shape) if d not in drop)
        given = out is not None
        if out is None:
            out = np.empty(shape, dtype=self.dtype)
        elif out.dtype != self.dtype or out.shape not in (shape, full_shape) or not out.flags.c_contiguous:
            raise SelectionError(
                f"out must be a C-contiguous {self.dtype} array of shape {shape}; got {out.dtype} {out.shape}"
            )
        if out.size:
            self._engine.read_into(
                starts,
                stops,
                steps,
                out.reshape(-1).view(np.uint8),
                threads if threads is not None else self.settings.threads,
                in_flight if in_flight is not None else self.settings.in_flight,
                self.settings.verify if verify is None else verify,
            )
        if reverse:
            # The engine fills ``out`` in increasing order. A caller's buffer is flipped in place (through
            # a copy) so that it holds the result; it keeps integer-indexed axes when of the full shape.
            if out.shape == shape:
                axes = tuple(d - sum(1 for x in drop if x < d) for d in reverse if d not in drop)
            else:
                axes = tuple(reverse)
            if not given:
                return np.flip(out, axis=axes)
            out[...] = np.flip(out, axis=axes).copy()
        return out

    def overview_for(
        self, window, max_shape: Sequence[int], *, levels: list[tuple[tuple[int, ...], str]] | None = None
    ) -> tuple[Array, tuple]:
        """The array a read of ``window`` at ``max_shape`` goes to (this one, or an overview level), and
        the window in its samples. ``levels``: those to choose among (default: :attr:`overviews`); one
        that reduces none of the result's axes is never taken, nor a decimated one without the plane."""
        (starts, stops, steps), drop, reverse = normalize_key(window, self.shape)
        kept = [d for d in range(self.ndim) if d not in drop]
        if (
            isinstance(max_shape, (str, bytes))
            or len(max_shape) != len(kept)
            or not all(isinstance(n, (int, np.integer)) and n > 0 for n in max_shape)
        ):
            raise SelectionError(
                f"max_shape={max_shape!r}: give a positive whole size for each of the {len(kept)} result axes"
            )
        if not kept:
            raise SelectionError("a read at max_shape takes a window with at least one axis left")
        if reverse:
            raise SelectionError("a read at max_shape takes windows with positive steps")
        extent = [stops[d] - starts[d] for d in kept]
        factors, level = (1,) * self.ndim, self
        for level_factors, path in self.overviews if levels is None else levels:  # finest first
            if any(level_factors[d] > 1 for d in kept) and all(
                e // level_factors[d] >= n for e, d, n in zip(extent, kept, max_shape, strict=True)
            ):
                candidate = Array(path, self.settings)
                # A mean level's plane is the mean of the block of planes holding the one asked for (an
                # overview across that axis too); a decimated level holds only every f-th plane.
                decimated = candidate.attributes.get("cubeslab", {}).get("method") == "decimate"
                if not decimated or all(starts[d] % level_factors[d] == 0 for d in drop):
                    factors, level = level_factors, candidate
        scaled: list[int | slice] = []
        for d, (a, b, s) in enumerate(zip(starts, stops, steps, strict=True)):
            f = factors[d]
            if d in drop:
                scaled.append(min(a // f, level.shape[d] - 1))
            else:
                scaled.append(slice(a // f, min(-(-b // f), level.shape[d]), max(1, s // f)))
        return level, tuple(scaled)

    def __getitem__(self, key) -> np.ndarray:
        return self.read(key)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        data = self.read()
        return data if dtype is None else data.astype(dtype, copy=False)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        layout = f"chunks={self.chunks}" + (f", shards={self.shards}" if self.shards else "")
        return f"<cubeslab.Array {self.path!r} shape={self.shape} dtype={self.dtype} {layout}>"

    # Dask and multiprocessing move arrays between processes by path.
    def __getstate__(self) -> dict:
        if self.writable:
            raise InvalidInputError(f"{self.path}: an array open for writing stays in its process")
        return {
            "path": self.path,
            "settings": self.settings,
            "copies": self.copies,
            "storage_options": self.storage_options,
        }

    def __setstate__(self, state: dict) -> None:
        path = state["path"]
        if state.get("storage_options") is not None:
            path = store_path(path, state["storage_options"])
        Array.__init__(self, path, state["settings"], state.get("copies", ()))
