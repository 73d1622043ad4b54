"""What the viewer reads from one store: its description, planes at the resolution a view asks for (from
the overview levels when they cover it), the value and labels at a sample; planes cached."""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from ..array import Array
from ..cube import read_node
from ..errors import SelectionError, StoreChangedError
from ..msi.cube import MsiCube
from ..opener import open as open_store
from ..overviews import data_version
from ..store_report import store_report

T = TypeVar("T")

MAX_SIDE = 4096
"""The largest plane side sent: a request for more is refused (400), not read."""

CACHE_BYTES = 256 << 20
"""Planes kept, least recently used dropped first."""


class PlaneSource:
    """One store, opened to read, and again when another process replaced it (``--overwrite``)."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._open()

    def _open(self) -> None:
        self.cube = open_store(self.path)
        self.array = self.cube.amplitude
        if self.array.ndim != 3:
            raise SelectionError(
                f"{self.path}: the viewer shows 3-D stores; this one has {self.array.ndim} axes"
            )
        with self._lock:
            self._cache: OrderedDict[tuple, tuple[np.ndarray, dict]] = OrderedDict()
            self._cached_bytes = 0
        self.__dict__.pop("_fixed_description", None)

    def _keep_up(self) -> None:
        """Planes as the store is now: shards that window writes elsewhere replaced are read again
        (and no plane cached before is served), and a store an overwrite replaced is opened again."""
        if self.array.refresh():
            with self._lock:
                self._cache.clear()
                self._cached_bytes = 0

    @property
    def description(self) -> dict:
        """Axes with their labels, the overview levels in use now, and the store's geometry, layout,
        codec and error (as ``info``)."""
        return self._fixed_description | {"levels": [list(factors) for factors, _ in self.array.overviews]}

    @functools.cached_property
    def _fixed_description(self) -> dict:
        """What of the description a write cannot change: made once, since ``info`` walks the store's
        files and a page load asks for it."""
        report = store_report(self.cube.path)
        shown = (
            "dims",
            "ranges",
            "dtype",
            "layout",
            "compression",
            "error",
            "compression_ratio",
            "live_traces",
        )
        described: dict = {}
        if isinstance(self.cube, MsiCube):
            mz, mean = self.cube.mean_spectrum()
            described = {"kind": "msi", "default_mz": float(mz[int(np.nanargmax(mean))]) if len(mz) else 0.0}
        return described | {
            "name": os.path.basename(self.path.rstrip("/")),
            "dims": self.cube.dims,
            "shape": list(self.array.shape),
            "labels": {dim: self.cube.coords[dim].tolist() for dim in self.cube.dims},
            "info": {key: report[key] for key in shown if key in report},
        }

    def plane(self, axis: int, index: int, region: tuple[int, int, int, int], size: tuple[int, int]):
        """The plane at ``index`` along ``axis``, rows ``region[0]:region[1]`` and columns
        ``region[2]:region[3]`` of it (in samples), read from the coarsest level with at least ``size``
        samples across it; returns the values (float32, C order) and where they are."""
        return self._fresh(lambda: self._plane(axis, index, region, size))

    def _fresh(self, read: Callable[[], T]) -> T:
        """``read()`` of the store as it is now (see :meth:`_keep_up`)."""
        self._keep_up()
        try:
            return read()
        except StoreChangedError:
            self._open()
            return read()

    def _plane(self, axis: int, index: int, region: tuple[int, int, int, int], size: tuple[int, int]):
        shape = self.array.shape
        if axis not in (0, 1, 2) or not 0 <= index < shape[axis]:
            raise SelectionError(f"no plane {index} along axis {axis} of a {shape} array")
        rows, cols = (n for d, n in enumerate(shape) if d != axis)
        r0, r1, c0, c1 = region
        if not (0 <= r0 < r1 <= rows and 0 <= c0 < c1 <= cols):
            raise SelectionError(f"region {region} is outside the {rows} x {cols} plane")
        if not (0 < size[0] <= MAX_SIDE and 0 < size[1] <= MAX_SIDE):
            raise SelectionError(f"size {size}: each side must be 1 to {MAX_SIDE} samples")
        # The levels as they are now: a write elsewhere makes them stale, a rebuild replaces them (under
        # the same names: the data version tells the planes read before from those read after).
        levels = self.array.overviews
        version = data_version(read_node(Path(self.array.path)))
        key = (axis, index, region, size, tuple(levels), version)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        window: list = [slice(None)] * 3
        window[axis] = index
        others = [d for d in range(3) if d != axis]
        window[others[0]], window[others[1]] = slice(r0, r1), slice(c0, c1)
        level, scaled = self.array.overview_for(tuple(window), size, levels=levels)
        # No level covers it more coarsely: every n-th sample, at most about twice the pixels asked for
        # and never more than MAX_SIDE (decided before reading).
        picked, steps = list(scaled), [1, 1]
        for n, d in enumerate(others):
            extent = picked[d].stop - picked[d].start
            steps[n] = max(1, -(-extent // min(2 * size[n], MAX_SIDE)))
            picked[d] = slice(picked[d].start, picked[d].stop, steps[n])
        values = np.ascontiguousarray(level.read(tuple(picked)), dtype=np.float32)
        level_factors = dict((path, f) for f, path in levels).get(level.path, (1, 1, 1))
        factors = [level_factors[d] * step for d, step in zip(others, steps, strict=True)]
        where = {
            "shape": list(values.shape),
            "factors": factors,
            "origin": [scaled[others[0]].start, scaled[others[1]].start],
        }
        with self._lock:
            self._cache[key] = (values, where)
            self._cached_bytes += values.nbytes
            while self._cached_bytes > CACHE_BYTES and len(self._cache) > 1:
                _, (dropped, _) = self._cache.popitem(last=False)
                self._cached_bytes -= dropped.nbytes
        return values, where

    def ion_image(self, mz: float, tol: str) -> np.ndarray:
        """An MSI store's ion image at ``mz ± tol`` (x across the first axis), float32."""
        return self._fresh(lambda: np.ascontiguousarray(self._msi().ion_image(mz, tol), dtype=np.float32))

    def spectrum(self, x: int, y: int) -> np.ndarray:
        """An MSI store's intensities at pixel (x, y) (the file's own numbers), float32."""
        return self._fresh(lambda: np.ascontiguousarray(self._msi().spectrum(x, y)[1], dtype=np.float32))

    def _msi(self) -> MsiCube:
        if not isinstance(self.cube, MsiCube):
            raise SelectionError(f"{self.path} is not a mass-spectrometry imaging store")
        return self.cube

    def sample(self, at: tuple[int, int, int]) -> dict:
        """The value at sample ``at`` (positions), its labels, and the trace's CDP X and Y if the store
        has them."""
        return self._fresh(lambda: self._sample(at))

    def _sample(self, at: tuple[int, int, int]) -> dict:
        if any(not 0 <= i < n for i, n in zip(at, self.array.shape, strict=True)):
            raise SelectionError(f"sample {at} is outside the {self.array.shape} array")
        found: dict = {
            "value": _finite(self.array[at]),
            "labels": {
                dim: self.cube.coords[dim][i].item() for dim, i in zip(self.cube.dims, at, strict=True)
            },
        }
        for name in ("cdp_x", "cdp_y"):
            has = (Path(self.path) / name / "zarr.json").is_file()  # a survey's trace coordinates
            found[name] = _finite(Array(Path(self.path) / name)[at[0], at[1]]) if has else None
        return found


def _finite(value) -> float | None:
    """``value`` as a float, or None where it is not finite (a missing trace is NaN): JSON has no NaN."""
    number = float(value)
    return number if np.isfinite(number) else None
