"""`MsiCube`: a mass-spectrometry imaging store in MSI terms. ``cubeslab.open`` returns one for a store
ingested from imzML. Pixels are addressed by the file's own coordinates (x and y as imzML and pyimzML
number them) and m/z by value; a tolerance given as a plain number is in Da, ``"10ppm"`` is relative."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import defaults
from ..cube import Cube, read_node
from ..errors import InvalidInputError, LabelError
from ..opener import KINDS
from ..overviews import MADE_FROM, data_version
from .ingest import MSI_KIND

if TYPE_CHECKING:
    import xarray as xr


def tolerance_da(mz: float, tol) -> float:
    """The half-width in Da of a window around ``mz``: ``tol`` in Da, or ``"Nppm"`` / ``"NDa"``."""
    if isinstance(tol, (int, float)):
        value, unit = float(tol), "Da"
    else:
        match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(ppm|Da|da)?\s*", str(tol))
        try:
            value, unit = float(match.group(1)) if match else math.nan, (match and match.group(2)) or "Da"
        except ValueError:
            value = math.nan
        if math.isnan(value):
            raise InvalidInputError(f"tol={tol!r}: give Da (0.01) or ppm ('10ppm')")
    if not 0 <= value < math.inf:
        raise InvalidInputError(f"tol={tol!r}: must be a finite number, not negative")
    # 1e-6 first: value * mz could overflow to infinity where the half-width itself is finite.
    return value * 1e-6 * abs(mz) if unit == "ppm" else value


class MsiCube(Cube):
    """An MSI cube (x, y, m/z): spectra, ion images, sub-cubes by label, the TIC image and mean spectrum."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # spectrum(), mean_spectrum() and .mz hand out these arrays themselves: an in-place edit by a
        # caller would move every later m/z window and pixel lookup, so it raises instead.
        for coord in self.coords.values():
            coord.setflags(write=False)

    @property
    def mz(self) -> np.ndarray:
        return self.coords["mz"]

    def _pixel(self, x: int, y: int) -> tuple[int, int]:
        if any(int(v) != v for v in (x, y)):
            raise LabelError(f"{self.path}: pixel x={x}, y={y}: pixels are whole numbers")
        xs, ys = self.coords["x"], self.coords["y"]
        i, j = int(x) - int(xs[0]), int(y) - int(ys[0])
        if not (0 <= i < len(xs) and 0 <= j < len(ys)) or not self.pixel_mask()[i, j]:
            raise LabelError(f"{self.path}: the file has no spectrum at pixel x={x}, y={y}")
        return i, j

    def spectrum(self, x: int, y: int) -> tuple[np.ndarray, np.ndarray]:
        """(m/z, intensity) at pixel (x, y)."""
        i, j = self._pixel(x, y)
        return self.mz, self.amplitude[i, j, :]

    def _bins(self) -> tuple[np.ndarray, np.ndarray]:
        """Each m/z value's lower and upper end: the edges of its bin where the m/z axis bins processed
        spectra (the axis holds their centres), the value itself where it is the file's own."""
        recorded = self.amplitude.attributes.get("imzml", {})
        axis, described, span = self.mz, recorded.get("mz_bin"), recorded.get("mz_range")
        if described is None or span is None or not len(axis):
            return axis, axis
        low = float(span[0])
        if str(described).endswith("ppm"):  # centre k = low * exp((k + 1/2) * ratio)
            half = axis[0] / low  # exp(ratio / 2)
            return axis / half, axis * half
        half = axis[0] - low  # centre k = low + (k + 1/2) * width
        return axis - half, axis + half

    def _mz_window(self, mz: float, tol) -> slice:
        """The m/z positions within ``mz ± tol``: values inside it, or bins overlapping it."""
        if not math.isfinite(mz):
            raise InvalidInputError(f"{self.path}: m/z {mz}: give a finite number")
        if mz <= 0:
            raise InvalidInputError(f"{self.path}: m/z {mz}: give a positive number, as m/z values are")
        half = tolerance_da(float(mz), tol)
        if not (math.isfinite(mz + half) and math.isfinite(mz - half)):
            # An infinite end would take in the whole axis, whatever m/z was asked for.
            raise InvalidInputError(
                f"{self.path}: m/z {mz:.10g} ± {half:.10g} Da is no finite window; give a smaller tolerance"
            )
        lower, upper = self._bins()
        # Written so that a NaN m/z fails too; a window touching the axis at all is an ordinary read
        # (of nothing, when it falls between two values).
        if not (len(lower) and mz + half >= lower[0] and mz - half <= upper[-1]):
            span = f"{lower[0]:.10g}..{upper[-1]:.10g}" if len(lower) else "empty"
            raise InvalidInputError(
                f"{self.path}: m/z {mz:.10g} ± {half:.10g} Da is outside the m/z axis ({span})"
            )
        # A bin [lower, upper) ends before a window that starts at its upper edge.
        first = int(np.searchsorted(upper, mz - half, "left" if upper is lower else "right"))
        return slice(first, max(first, int(np.searchsorted(lower, mz + half, "right"))))

    def ion_image(self, mz, tol="10ppm") -> np.ndarray:
        """The sum of intensities within ``mz ± tol`` at every pixel (x, y): of the m/z values inside
        the window, or in a binned (processed) store, of every bin the window overlaps. For a list of m/z
        values, a stack of images (one per value, first axis)."""
        if np.ndim(mz) > 0:
            if not np.size(mz):
                raise InvalidInputError(f"{self.path}: ion_image of an empty list of m/z values")
            return np.stack([self.ion_image(m, tol) for m in np.asarray(mz, dtype=np.float64)])
        window = self._mz_window(float(mz), tol)
        values = self.amplitude[:, :, window]
        return values.sum(axis=2, dtype=np.float64)

    @property
    def subcube(self) -> _Subcube:
        """``msi.subcube[x0:x1, y0:y1, mz0:mz1]``: the intensities within those labels (x and y
        inclusive, as pixel numbers; m/z by value) as an ``xarray.DataArray`` like :meth:`to_xarray`'s
        (needs the ``xarray`` extra), with ``.mz``, ``.x``, ``.y`` of what was cut. A range takes no
        step and runs from the smaller label to the larger; an end left out runs to that end of the axis."""
        return _Subcube(self)

    def tic(self) -> np.ndarray:
        """The total ion current image (x, y), computed during ingest (again from the cube, if it was
        written since)."""
        kept = self._kept("tic")
        return (
            kept
            if kept is not None
            else np.concatenate([slab.sum(axis=2, dtype=np.float64) for _, slab in self._slabs()])
        )

    def mean_spectrum(self) -> tuple[np.ndarray, np.ndarray]:
        """(m/z, mean intensity over the pixels the file has), computed during ingest (again from the
        cube, if it was written since)."""
        kept = self._kept("mean_spectrum")
        if kept is None:
            kept = self._spectra_summed_again() / max(int(self.pixel_mask().sum()), 1)
        return self.mz, kept

    def _kept(self, name: str) -> np.ndarray | None:
        """What the ingest computed as ``name``, if the cube's data is still the version it was made from."""
        if self.amplitude.writable and self.amplitude.cache_info()["dirty_bytes"] > 0:
            return None  # this handle's changes, not yet written back, are in no version
        stored = self._array(name)
        made_from = stored.attributes.get("cubeslab", {}).get(MADE_FROM)
        current = data_version(read_node(self.path / Path(self.amplitude.path).name))
        # A store from before versions were counted records none: its sums are taken as they are.
        return stored[...] if made_from is None or made_from == current else None

    def _spectra_summed_again(self) -> np.ndarray:
        """The spectra of the pixels the file has, summed (a write into a pixel it lacks is left out)."""
        mask, total = self.pixel_mask(), np.zeros(self.shape[2], np.float64)
        for start, slab in self._slabs():
            total += slab[mask[start : start + len(slab)]].sum(axis=0, dtype=np.float64)
        return total

    def _slabs(self):
        """``(first x, the cube's values at x, x + 1, ...)``, slab by slab of x within the default memory
        limit (summed in float64 by the callers, without a float64 copy of each slab)."""
        nx, ny, nmz = self.shape
        rows = max(1, defaults.MEMORY_LIMIT // 4 // max(ny * nmz * 8, 1))
        for start in range(0, nx, rows):
            yield start, self.amplitude[start : start + rows]

    def pixel_mask(self) -> np.ndarray:
        """True where the file has a spectrum."""
        if not hasattr(self, "_mask"):
            self._mask = self._array("pixel_mask")[...]
            # Handed out as is and read by every spectrum() lookup, so a caller's edit must not stick.
            self._mask.setflags(write=False)
        return self._mask

    def to_xarray(self, chunks=None):
        """The cube as an ``xarray.DataArray`` (x, y, mz) with its coordinates (needs the ``xarray``
        extra); dask-backed in shard-sized chunks when ``chunks`` is given."""
        data = (
            self.to_dask(None if chunks in (None, "shards", {}) else chunks)
            if chunks is not None
            else self[...]
        )
        return self._labelled(data, (slice(None),) * 3)

    def _labelled(self, data, windows: tuple[slice, ...]) -> xr.DataArray:
        """``data`` (the amplitudes at ``windows``) with the x, y and m/z labels of those windows."""
        import xarray as xr

        return xr.DataArray(
            data, dims=("x", "y", "mz"),
            coords={d: self.coords[d][w] for d, w in zip(("x", "y", "mz"), windows, strict=True)},
            name="intensity",
            attrs=self.amplitude.attributes.get("imzml", {}),
        )  # fmt: skip


class _Subcube:
    def __init__(self, cube: MsiCube):
        self.cube = cube

    def __getitem__(self, key) -> xr.DataArray:
        if not isinstance(key, tuple) or len(key) != 3 or not all(isinstance(k, slice) for k in key):
            raise InvalidInputError("subcube takes three label ranges: msi.subcube[x0:x1, y0:y1, mz0:mz1]")
        windows = []
        for name, k in zip(("x", "y", "mz"), key, strict=True):
            text = ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step)).rstrip(":")
            # Labels are not positions: a step (in pixels? in Da?) has no single meaning, so none is guessed.
            if k.step is not None:
                raise InvalidInputError(f"subcube: the {name} range {text} has a step; give start:stop only")
            for end in (k.start, k.stop):
                number = isinstance(end, (int, float, np.number)) and not isinstance(end, bool)
                if end is not None and not number:
                    raise InvalidInputError(f"subcube: the {name} range {text} takes numbers, not {end!r}")
            if k.start is not None and k.stop is not None and k.start > k.stop:
                raise InvalidInputError(
                    f"subcube: the {name} range {text} runs backwards; give the smaller label first"
                )
            axis = self.cube.coords[name]
            low = int(np.searchsorted(axis, k.start, "left")) if k.start is not None else 0
            high = int(np.searchsorted(axis, k.stop, "right")) if k.stop is not None else len(axis)
            windows.append(slice(low, high))
        return self.cube._labelled(self.cube.amplitude[tuple(windows)], tuple(windows))


KINDS[MSI_KIND] = MsiCube
