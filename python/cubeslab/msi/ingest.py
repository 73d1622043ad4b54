"""An imzML file into a store: the cube (x, y, m/z) of intensities, its coordinates, the pixel mask, the
TIC image and the mean spectrum.

Continuous mode (one m/z axis shared by every pixel) is stored exactly. Processed mode (an m/z array per
pixel) is binned onto one axis: bins of a fixed width in Da, or of a fixed relative width in ppm (geometric
edges), from the low end of ``mz_range``; each peak's intensity is added to its bin. Pixels the file does
not have hold 0 and are False in ``pixel_mask``."""

from __future__ import annotations

import math
import os
import re

import numpy as np

from .. import _engine, defaults
from ..array import Array
from ..create import create
from ..errors import InvalidInputError
from ..sources.ingest import Progress, planned, summary
from .imzml import Imzml, Spectra, check_ibd, parse

MSI_KIND = "msi"
"""``attributes["cubeslab"]["kind"]`` of an MSI store's main array."""

DEFAULT_ACCESS = "spectra,ion-images"
"""The reads an MSI store is laid out for unless ``--access`` says otherwise."""


def is_imzml(path: str | os.PathLike) -> bool:
    return os.fspath(path).lower().endswith(".imzml")


def parse_mz_bin(text: str | float | None) -> tuple[str, float] | None:
    """``"10ppm"`` → ("ppm", 10.0); ``"0.01"`` or ``"0.01Da"`` → ("Da", 0.01); None stays None."""
    if text is None:
        return None
    if isinstance(text, (int, float)):
        unit, value = "Da", float(text)
    else:
        match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(ppm|da|Da)?\s*", str(text))
        if not match:
            raise InvalidInputError(f"--mz-bin {text!r}: give a width in Da (0.01) or ppm (10ppm)")
        unit, value = ("ppm" if match.group(2) == "ppm" else "Da"), float(match.group(1))
    if not value > 0:
        raise InvalidInputError(f"--mz-bin {text!r}: the width must be positive")
    return unit, value


def parse_mz_range(text) -> tuple[float, float] | None:
    """``"100:1000"`` or a pair → (low, high)."""
    if text is None:
        return None
    if isinstance(text, str):
        parts = text.split(":")
        if len(parts) != 2:
            raise InvalidInputError(f"--mz-range {text!r}: give LOW:HIGH, e.g. 100:1000")
        try:
            low, high = float(parts[0]), float(parts[1])
        except ValueError:
            raise InvalidInputError(f"--mz-range {text!r}: LOW and HIGH must be numbers") from None
    else:
        low, high = (float(v) for v in text)
    if not high > low:
        raise InvalidInputError(f"--mz-range {text!r}: HIGH must be above LOW")
    return low, high


class Binning:
    """Bins of ``width`` Da, or of ``width`` ppm (geometric), from ``low`` up to and including ``high``."""

    def __init__(self, unit: str, width: float, low: float, high: float):
        self.unit, self.width, self.low, self.high = unit, width, low, high
        if unit == "ppm":
            self.ratio = math.log1p(width * 1e-6)
            self.n = math.floor(math.log(high / low) / self.ratio) + 1
        else:
            self.n = math.floor((high - low) / width) + 1

    def index(self, mz: np.ndarray) -> np.ndarray:
        """Each m/z's bin (may fall outside 0..n for values outside the range)."""
        mz = np.asarray(mz, dtype=np.float64)
        if self.unit == "ppm":
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.floor(np.log(mz / self.low) / self.ratio).astype(np.int64)
        return np.floor((mz - self.low) / self.width).astype(np.int64)

    def centres(self) -> np.ndarray:
        k = np.arange(self.n, dtype=np.float64)
        if self.unit == "ppm":
            return self.low * np.exp((k + 0.5) * self.ratio)
        return self.low + (k + 0.5) * self.width

    def describe(self) -> str:
        return f"{self.width:g} {self.unit}"


def default_bin(spectra: Spectra, n: int) -> tuple[str, float]:
    """The median, over up to 200 spectra spread through the file, of each spectrum's smallest spacing
    between neighbouring m/z values, in Da, to 3 significant digits."""
    picks = np.unique(np.linspace(0, n - 1, min(n, 200)).astype(int))
    spacings = []
    for i in picks:
        gaps = np.diff(spectra.mz(int(i)).astype(np.float64))
        gaps = gaps[gaps > 0]
        if gaps.size:
            spacings.append(gaps.min())
    if not spacings:
        raise InvalidInputError(
            f"{spectra.imzml.path}: no spectrum has two distinct m/z values to size bins by"
        )
    width = float(np.median(spacings))
    return "Da", float(f"{width:.3g}")


def _check_grid(imzml: Imzml) -> None:
    position = imzml.position
    if position[:, 2].max() > 1:
        raise InvalidInputError(
            f"{imzml.path}: a 3-D imzML (z up to {int(position[:, 2].max())}); cubeslab stores one section"
        )
    _, first, counts = np.unique(position[:, :2], axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        pixel = position[first[np.argmax(counts > 1)], :2]
        same = np.flatnonzero((position[:, :2] == pixel).all(axis=1))
        raise InvalidInputError(
            f"{imzml.path}: spectra {same[0]} and {same[1]} are both at pixel x={pixel[0]}, y={pixel[1]}"
        )


def _sorted(path: str, i: int, mz: np.ndarray) -> None:
    bad = np.flatnonzero(np.diff(mz) < 0)
    if bad.size:
        raise InvalidInputError(
            f"{path}: spectrum {i}'s m/z array is not sorted (value {bad[0] + 1}: {mz[bad[0] + 1]} after "
            f"{mz[bad[0]]})"
        )


def ingest_imzml(
    source: str | os.PathLike,
    store: str | os.PathLike,
    *,
    mz_bin: str | float | None = None,
    mz_range=None,
    overwrite: bool = False,
    durable: bool = False,
    layout: str = defaults.LAYOUT,
    access: str | None = None,
    compress: str | None = None,
    memory_limit: int | None = None,
    progress: Progress | None = None,
    checksum: bool = True,
) -> dict:
    """Write an imzML file (and the ``.ibd`` beside it) into a new store; returns the summary."""
    imzml = parse(source)
    check_ibd(imzml, checksum=checksum)
    _check_grid(imzml)
    spectra = Spectra(imzml)
    path = imzml.path
    n = imzml.n_spectra
    report: dict = {"mode": "continuous" if imzml.continuous else "processed", "spectra": n}
    if imzml.continuous:
        if mz_bin is not None or mz_range is not None:
            raise InvalidInputError(
                f"{path}: continuous mode is stored exactly; --mz-bin and --mz-range bin processed data"
            )
        if len(set(imzml.mz_length.tolist())) != 1:
            raise InvalidInputError(f"{path}: continuous mode, yet the spectra's m/z arrays differ in length")
        mz = spectra.mz(0).astype(np.float64)
        _sorted(path, 0, mz)
        dtype = imzml.intensity.dtype.newbyteorder("=")
        binning = None
    else:
        unit, width = parse_mz_bin(mz_bin) or default_bin(spectra, n)
        limits = parse_mz_range(mz_range)
        if limits is None:
            low, high = math.inf, -math.inf
            for i in range(n):
                values = spectra.mz(i)
                if values.size:
                    low, high = min(low, float(values.min())), max(high, float(values.max()))
            if not high >= low:
                raise InvalidInputError(f"{path}: every spectrum is empty")
            limits = (low, high if high > low else low + width)
        if unit == "ppm" and limits[0] <= 0:
            raise InvalidInputError(
                f"{path}: ppm bins need a positive low end of the m/z range, not {limits[0]}"
            )
        binning = Binning(unit, width, *limits)
        mz = binning.centres()
        dtype = np.result_type(imzml.intensity.dtype.newbyteorder("="), np.float32)
        report.update(mz_bin=binning.describe() + ("" if mz_bin is not None else " (chosen from the data)"),
                      mz_range=list(limits), outside_range=0, merged=0)  # fmt: skip
    position = imzml.position
    xs = np.arange(position[:, 0].min(), position[:, 0].max() + 1)
    ys = np.arange(position[:, 1].min(), position[:, 1].max() + 1)
    ix, iy = position[:, 0] - xs[0], position[:, 1] - ys[0]
    shape = (len(xs), len(ys), len(mz))
    access = access or DEFAULT_ACCESS
    chunks, shards = planned(shape, dtype, layout, access, compress)
    limit = int(memory_limit or defaults.MEMORY_LIMIT)
    metadata = {"mode": report["mode"], "source": os.fspath(source), **imzml.metadata}
    if binning is not None:
        metadata.update(mz_bin=binning.describe(), mz_range=[binning.low, binning.high])
    attributes = {"cubeslab": {"kind": MSI_KIND}, "imzml": metadata}
    mask = np.zeros(shape[:2], dtype=bool)
    mask[ix, iy] = True
    tic = np.zeros(shape[:2], dtype=np.float64)
    total = np.zeros(len(mz), dtype=np.float64)
    publication = _engine.Publication(os.fspath(store), overwrite)
    staging = os.fspath(publication.staging)
    row_bytes = shape[1] * shape[2] * dtype.itemsize
    rows = max(shards[0], (limit // 2 // max(row_bytes, 1)) // shards[0] * shards[0])
    order = np.argsort(ix, kind="stable")
    with create(
        staging, shape, dtype, dims=["x", "y", "mz"], coords={"x": xs, "y": ys, "mz": mz}, chunks=chunks,
        shards=shards, compress=compress, cache=max(limit // 2, 1), attributes=attributes, fill_value=0,
    ) as out:  # fmt: skip
        start = 0
        for x0 in range(0, shape[0], rows):
            x1 = min(shape[0], x0 + rows)
            slab = np.zeros((x1 - x0, *shape[1:]), dtype=dtype)
            while start < n and ix[order[start]] < x1:
                i = int(order[start])
                values = spectra.intensity(i)
                if binning is None:
                    if len(values) != len(mz):
                        raise InvalidInputError(
                            f"{path}: spectrum {i} has {len(values)} intensities for {len(mz)} m/z values"
                        )
                    row = values
                else:
                    peaks = spectra.mz(i)
                    _sorted(path, i, peaks)
                    bins = binning.index(peaks)
                    inside = (bins >= 0) & (bins < binning.n)
                    report["outside_range"] += int((~inside).sum())
                    bins, weights = bins[inside], values[inside].astype(np.float64)
                    report["merged"] += int(bins.size - np.unique(bins).size)
                    row = np.bincount(bins, weights=weights, minlength=binning.n)
                slab[ix[i] - x0, iy[i]] = row
                tic[ix[i], iy[i]] = float(np.sum(row, dtype=np.float64))
                total += row
                start += 1
            out.amplitude[x0:x1] = slab
            if progress is not None:
                progress(x1 * row_bytes, shape[0] * row_bytes)
    for name, values, dims in (
        ("pixel_mask", mask, ["x", "y"]),
        ("tic", tic, ["x", "y"]),
        ("mean_spectrum", total / max(int(mask.sum()), 1), ["mz"]),
    ):
        Array.from_numpy(os.path.join(staging, name), values, chunks=values.shape, dimension_names=dims)
    publication.commit(durable)
    return summary(path, store, shape, dtype, chunks, shards, layout, access) | report
