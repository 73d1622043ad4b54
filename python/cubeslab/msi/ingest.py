"""An imzML file into a store: the cube (x, y, m/z) of intensities, its coordinates, the pixel mask, the
TIC image and the mean spectrum.

Continuous mode (one m/z axis shared by every pixel) is stored exactly. Processed mode (an m/z array per
pixel) is binned onto one axis: bins of a fixed width in Da, or of a fixed relative width in ppm (geometric
edges), from the low end of ``mz_range``; each peak's intensity is added to its bin. Peaks below the low
end or above the high end are outside (counted), though the last bin may reach past the high end. The m/z
coordinate holds the bins' centres. Pixels the file does not have hold 0 and are False in ``pixel_mask``."""

from __future__ import annotations

import math
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .. import _engine, defaults
from ..array import Array, zarr_json
from ..create import MAIN_ARRAY, new_store
from ..errors import InvalidInputError
from ..jobs import run_watched
from ..locations import is_remote, publishing, recorded_source, store_size
from ..overviews import MADE_FROM
from ..schema import COMPLETE
from ..sources.ingest import Progress, planned, summary
from .imzml import IbdDigest, Imzml, Spectra, check_ibd, parse

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
        try:
            unit, value = (
                ("ppm" if match and match.group(2) == "ppm" else "Da"),
                float(match.group(1) if match else ""),
            )
        except ValueError:
            raise InvalidInputError(f"--mz-bin {text!r}: give a width in Da (0.01) or ppm (10ppm)") from None
    if not 0 < value < math.inf:
        raise InvalidInputError(f"--mz-bin {text!r}: the width must be a positive number")
    return unit, value


def counted(n: float, spec: str = ",.0f") -> str:
    """``n`` for a message, as ``spec`` formats it, or in powers of ten where that would run to dozens of
    digits (bins of a tiny width)."""
    return f"{n:{spec}}" if n < 1e15 else f"{n:.3g}"


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
    if not (math.isfinite(low) and math.isfinite(high)):
        raise InvalidInputError(f"--mz-range {text!r}: LOW and HIGH must be finite numbers")
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


EMPTY_GRID_CELLS = 1 << 24
EMPTY_GRID_RATIO = 1000
"""A pixel grid of more than ``EMPTY_GRID_CELLS`` cells and ``EMPTY_GRID_RATIO`` cells a spectrum is refused:
its spectra are scattered by a wrong position, and the cube would be almost all empty."""

BINS_PER_PEAK = 4
"""A chosen bin width gives at most this many bins per value of the longest spectrum: the smallest
spacing of sparse (centroided) peaks would otherwise ask for millions of bins."""


def default_bin(spectra: Spectra, n: int, span: float) -> tuple[str, float]:
    """The median, over up to 200 spectra spread through the file, of each spectrum's smallest spacing
    between neighbouring m/z values, in Da, to 3 significant digits; at least ``span`` (of the m/z
    range) over :data:`BINS_PER_PEAK` times the most values a spectrum has."""
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
    width = max(float(np.median(spacings)), span / (BINS_PER_PEAK * int(spectra.imzml.mz_length.max())))
    return "Da", float(f"{width:.3g}")


def _check_room(path: str, store, shape, dtype: np.dtype) -> None:
    """An uncompressed cube that cannot fit the disk the store goes to is refused before anything is
    written (a bin width chosen from sparse peaks can ask for millions of bins)."""
    need = math.prod(shape) * dtype.itemsize
    folder = Path(os.path.abspath(os.fspath(store))).parent
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if need > free:
        raise InvalidInputError(
            f"{path}: the cube ({shape[0]} x {shape[1]} pixels x {counted(shape[2])} m/z values, "
            f"{dtype.name}) takes {counted(need / 1e9, ',.1f')} GB and {folder} has {free / 1e9:,.1f} GB "
            "free; choose wider bins (--mz-bin, e.g. 10ppm), a narrower --mz-range, or --compress"
        )


MAX_PIXELS = 1 << 20
"""Widest grid taken along x or y: far beyond any instrument's raster, and small enough that the grid's
own arrays fit in memory."""


def _check_grid(imzml: Imzml) -> None:
    position = imzml.position
    if position[:, 2].max() > 1:
        raise InvalidInputError(
            f"{imzml.path}: a 3-D imzML (z up to {int(position[:, 2].max())}); cubeslab stores one section"
        )
    for axis, name in enumerate("xy"):
        low, high = int(position[:, axis].min()), int(position[:, axis].max())
        if high - low >= MAX_PIXELS:
            raise InvalidInputError(
                f"{imzml.path}: pixel {name} runs {low}..{high}, over {MAX_PIXELS:,} pixels across"
            )
    _, first, counts = np.unique(position[:, :2], axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        pixel = position[first[np.argmax(counts > 1)], :2]
        same = np.flatnonzero((position[:, :2] == pixel).all(axis=1))
        raise InvalidInputError(
            f"{imzml.path}: spectra {same[0]} and {same[1]} are both at pixel x={pixel[0]}, y={pixel[1]}"
        )


def _sorted(path: str, i: int, mz: np.ndarray) -> None:
    odd = np.flatnonzero(~np.isfinite(mz))
    if odd.size:
        raise InvalidInputError(
            f"{path}: spectrum {i}'s m/z value {odd[0]} is {mz[odd[0]]}; m/z values are finite numbers"
        )
    bad = np.flatnonzero(np.diff(mz) < 0)
    if bad.size:
        raise InvalidInputError(
            f"{path}: spectrum {i}'s m/z array is not sorted (value {bad[0] + 1}: {mz[bad[0] + 1]} after "
            f"{mz[bad[0]]}); m/z arrays are ascending, so its offset, length or encoding in the imzML is "
            "likely wrong"
        )


def _slabs(shape, shards, itemsize: int, budget: int) -> list[tuple[slice, slice, slice]]:
    """(x, y, m/z) windows of the slabs written, each whole shards within ``budget`` bytes (beyond one
    shard): runs of y rows when a shard's row of pixels and every m/z value fits (the order imzML
    writers lay spectra out in, so each slab's spectra are read in one stretch of the ``.ibd``), else
    runs along x, else runs along m/z over every pixel."""
    nx, ny, n = shape

    def runs(length: int, step: int, unit: int) -> list[slice]:
        count = max(1, budget // max(unit, 1)) * step
        return [slice(a, min(length, a + count)) for a in range(0, length, count)]

    if shards[1] * nx * n * itemsize <= budget:
        return [(slice(0, nx), y, slice(0, n)) for y in runs(ny, shards[1], shards[1] * nx * n * itemsize)]
    if shards[0] * ny * n * itemsize <= budget:
        return [(x, slice(0, ny), slice(0, n)) for x in runs(nx, shards[0], shards[0] * ny * n * itemsize)]
    return [(slice(0, nx), slice(0, ny), m) for m in runs(n, shards[2], nx * ny * shards[2] * itemsize)]


class _Rows:
    """Spectra ``chosen`` (file order), their values in the m/z window ``mw``, as one array, read
    spectrum by spectrum: the files the engine does not read itself (processed mode, binned here, and
    zlib-compressed arrays). Processed spectra's counts (peaks outside the range, merged into a filled
    bin) are kept when ``count``."""

    def __init__(self, spectra: Spectra, binning: Binning | None, report: dict):
        self.spectra, self.binning, self.report = spectra, binning, report

    def __call__(self, chosen: np.ndarray, mw: slice, *, count: bool) -> np.ndarray:
        m = self.spectra.imzml
        kind = np.float64 if self.binning else m.intensity.dtype.newbyteorder("=")
        rows = np.empty((len(chosen), mw.stop - mw.start), dtype=kind)
        for k, i in enumerate(chosen):
            i = int(i)
            values = self.spectra.intensity(i)
            if self.binning is None:
                rows[k] = values[mw]
                continue
            peaks = self.spectra.mz(i)
            _sorted(m.path, i, peaks)
            bins = self.binning.index(peaks)
            inside = (bins >= 0) & (bins < self.binning.n) & (peaks <= self.binning.high)
            if count:
                self.report["outside_range"] += int((~inside).sum())
                self.report["merged"] += int(inside.sum() - np.unique(bins[inside]).size)
            binned = np.bincount(
                bins[inside], weights=values[inside].astype(np.float64), minlength=self.binning.n
            )
            rows[k] = binned[mw]
        return rows


NO_ROW = np.iinfo(np.uint64).max
"""A pixel without a spectrum, in the engine's per-cell offsets."""


def _by_cell(values, pixels, shape, missing: int = 0) -> np.ndarray:
    """Per-spectrum ``values`` laid out per pixel (x major, as the cube's cells), ``missing`` elsewhere."""
    ix, iy = pixels
    out = np.full(shape[0] * shape[1], missing, dtype=np.uint64)
    out[ix * shape[1] + iy] = values
    return out


def _reported(progress: Progress | None):
    """The engine's phases as ``progress(done, total)`` calls."""
    return None if progress is None else (lambda phase: progress(phase.done, phase.total))


def _fill_in_engine(main: str, imzml: Imzml, pixels, shape, limit: int, progress: Progress | None):
    """Fill the cube ``main`` from the ``.ibd`` in the engine (continuous mode, uncompressed arrays);
    returns the TIC image and the summed spectrum."""
    if (imzml.intensity_length != shape[2]).any():
        i = int(np.argmax(imzml.intensity_length != shape[2]))
        raise InvalidInputError(
            f"{imzml.path}: spectrum {i} has {int(imzml.intensity_length[i])} intensities for {shape[2]} m/z "
            "values"
        )
    offsets = _by_cell(imzml.intensity_offset, pixels, shape, NO_ROW)
    # imzML's binary arrays are little-endian.
    tic, total = run_watched(
        lambda handle: _engine.fill_from_rows(main, imzml.ibd, offsets, True, limit, progress=handle),
        _reported(progress),
    )
    return np.asarray(tic).reshape(shape[:2]), np.asarray(total)


def _bin_in_engine(
    main: str, imzml: Imzml, binning: Binning, pixels, shape, limit: int, progress: Progress | None, report
):
    """Fill the cube ``main`` from the ``.ibd`` in the engine, each processed spectrum binned onto the
    m/z axis (uncompressed arrays); counts its peaks outside the range and merged into a filled bin in
    ``report``; returns the TIC image and the summed spectrum."""
    if (imzml.mz_length != imzml.intensity_length).any():
        i = int(np.argmax(imzml.mz_length != imzml.intensity_length))
        raise InvalidInputError(
            f"{imzml.path}: spectrum {i} has {int(imzml.mz_length[i])} m/z values and "
            f"{int(imzml.intensity_length[i])} intensities"
        )
    step = binning.ratio if binning.unit == "ppm" else binning.width
    bins = (binning.unit, binning.low, step, binning.high)
    values = _by_cell(imzml.intensity_offset, pixels, shape, NO_ROW)
    keys, lengths = (_by_cell(column, pixels, shape) for column in (imzml.mz_offset, imzml.intensity_length))
    records = _by_cell(np.arange(imzml.n_spectra), pixels, shape)
    tic, total, outside, merged = run_watched(
        lambda handle: _engine.fill_from_binned_rows(
            main, imzml.ibd, values, keys, lengths, records, imzml.mz.dtype.name, imzml.intensity.dtype.name,
            bins, (imzml.path, "spectrum", "m/z array"), limit, progress=handle,
        ),
        _reported(progress),
    )  # fmt: skip
    report["outside_range"] += outside
    report["merged"] += merged
    return np.asarray(tic).reshape(shape[:2]), np.asarray(total)


def _fill_in_slabs(out: Array, rows_of: _Rows, pixels, shape, shards, limit: int, progress):
    """Fill the cube ``out`` (open for writing) slab by slab through window writes, the spectra read
    and binned here; returns the TIC image and the summed spectrum."""
    dtype = out.dtype
    ix, iy = pixels
    tic = np.zeros(shape[:2], dtype=np.float64)
    total = np.zeros(shape[2], dtype=np.float64)
    # A sixth of the bound per slab: while one slab is written, the next one's spectra and the slab made
    # of them are in memory too, and the write cache holds half the bound.
    slabs = _slabs(shape, shards, dtype.itemsize, limit // 6)

    def load(xw: slice, yw: slice, mw: slice) -> np.ndarray:
        """The slab at these windows, its spectra's sums added to the TIC and the total."""
        inside = (ix >= xw.start) & (ix < xw.stop) & (iy >= yw.start) & (iy < yw.stop)
        chosen = np.flatnonzero(inside)
        values = rows_of(chosen, mw, count=mw.start == 0)
        slab = np.zeros((xw.stop - xw.start, yw.stop - yw.start, mw.stop - mw.start), dtype)
        slab[ix[chosen] - xw.start, iy[chosen] - yw.start] = values
        tic[ix[chosen], iy[chosen]] += values.sum(axis=1, dtype=np.float64)
        total[mw] += values.sum(axis=0, dtype=np.float64)
        return slab

    with ThreadPoolExecutor(1) as reader:
        written, everything = 0, int(np.prod(shape)) * dtype.itemsize
        # The next slab is read while this one is encoded and written in the engine.
        ahead = reader.submit(load, *slabs[0])
        for k, (xw, yw, mw) in enumerate(slabs):
            slab = ahead.result()
            if k + 1 < len(slabs):
                ahead = reader.submit(load, *slabs[k + 1])
            out[xw, yw, mw] = slab
            written += slab.nbytes
            if progress is not None:
                progress(written, everything)
    return tic, total


def _write_views(staging: str, shape, dtype, accesses: list[str], compress, limit: int) -> dict:
    """Orientation copies of the cube, one per access (``spectra``, ``ion-images``), each laid out for
    that access alone and filled from the cube in the engine; reads then go to the copy predicted
    fastest, as for a survey's views. Returns the group's record of them."""
    written: dict = {}
    source = os.path.join(staging, MAIN_ARRAY)
    # A copy's shards carry the store's identity, as the cube's do.
    identity = {"cubeslab": {"generation": Array(source).metadata["attributes"]["cubeslab"]["generation"]}}
    for access in accesses:
        if access in written:
            continue
        chunks, shards = planned(shape, dtype, "auto", access, compress, limit)
        name = f"{MAIN_ARRAY}-{re.sub(r'[^A-Za-z0-9]+', '-', access)}"
        Array.create(
            os.path.join(staging, name), shape, dtype, chunks=chunks, shards=shards, compress=compress,
            dimension_names=["x", "y", "mz"], fill_value=0, attributes=identity,
        )  # fmt: skip
        _engine.copy_array(source, os.path.join(staging, name), max(limit // 2, 1))
        layout = f"{'x'.join(map(str, chunks))}/{'x'.join(map(str, shards))}"
        written[access] = {"array": name, "layout": layout, "stored_bytes": store_size(Path(staging, name))}
    return written


def ingest_imzml(
    source: str | os.PathLike, store: str | os.PathLike, *, checksum: bool = True, **options
) -> dict:
    """Write an imzML file (and the ``.ibd`` beside it) into a new store; returns the summary. Options:
    those of :func:`_ingest_parsed`. ``checksum``: check the ``.ibd`` against the SHA-1 or MD5 the
    imzML gives."""
    imzml = parse(source)
    with IbdDigest(source, checksum) as digest:
        digest.start(imzml.checksum)
        return _ingest_parsed(imzml, digest, store, **options)


def _ingest_parsed(
    imzml: Imzml,
    digest: IbdDigest,
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
    views: list[str] | None = None,
) -> dict:
    """The ingest of a parsed imzML file; the options are :func:`cubeslab.ingest`'s."""
    check_ibd(imzml)
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
        limits = parse_mz_range(mz_range)
        if limits is None:
            low, high = math.inf, -math.inf
            for i in range(n):
                values = spectra.mz(i)
                if values.size:
                    # A spectrum's m/z values rise (the fill refuses one where they do not): its ends are
                    # its extremes, two pages of the mapped file instead of the whole array.
                    low, high = min(low, float(values[0])), max(high, float(values[-1]))
            if not high >= low:
                raise InvalidInputError(f"{path}: every spectrum is empty")
            limits = (low, high)
        unit, width = parse_mz_bin(mz_bin) or default_bin(spectra, n, limits[1] - limits[0])
        if limits[1] == limits[0]:  # one m/z value: one bin from it
            limits = (limits[0], limits[0] * (1 + width * 1e-6) if unit == "ppm" else limits[0] + width)
        if unit == "ppm" and limits[0] <= 0:
            raise InvalidInputError(
                f"{path}: ppm bins need a positive low end of the m/z range, not {limits[0]}"
            )
        binning = Binning(unit, width, *limits)
        dtype = np.result_type(imzml.intensity.dtype.newbyteorder("="), np.float32)
        report.update(mz_bin=binning.describe() + ("" if mz_bin is not None else " (chosen from the data)"),
                      mz_range=list(limits), outside_range=0, merged=0)  # fmt: skip
    position = imzml.position
    xs = np.arange(position[:, 0].min(), position[:, 0].max() + 1)
    ys = np.arange(position[:, 1].min(), position[:, 1].max() + 1)
    ix, iy = position[:, 0] - xs[0], position[:, 1] - ys[0]
    cells = len(xs) * len(ys)
    if cells > EMPTY_GRID_CELLS and cells > EMPTY_GRID_RATIO * len(position):
        raise InvalidInputError(
            f"{imzml.path}: its {len(position):,} spectra lie on a grid of {len(xs):,} x {len(ys):,} pixels "
            f"(x {xs[0]}..{xs[-1]}, y {ys[0]}..{ys[-1]}), almost all empty; a pixel position is likely wrong"
        )
    shape = (len(xs), len(ys), len(mz) if binning is None else binning.n)
    if compress in (None, "none") and not is_remote(store):
        _check_room(imzml.path, store, shape, dtype)
    limit = int(memory_limit or defaults.MEMORY_LIMIT)
    if binning is not None:
        if binning.n * 8 > limit:
            raise InvalidInputError(
                f"{imzml.path}: {counted(binning.n)} bins of {binning.describe()}: the m/z axis alone takes "
                f"{counted(binning.n * 8 / 1e9, ',.1f')} GB, over the memory limit; choose wider bins "
                "(--mz-bin, e.g. 10ppm) or a narrower --mz-range"
            )
        mz = binning.centres()
    access = access or DEFAULT_ACCESS
    chunks, shards = planned(shape, dtype, layout, access, compress, limit)
    metadata = {"mode": report["mode"], "source": recorded_source(imzml.path), **imzml.metadata}
    if binning is not None:
        metadata.update(mz_bin=binning.describe(), mz_range=[binning.low, binning.high])
    attributes = {"cubeslab": {"kind": MSI_KIND}, "imzml": metadata}
    mask = np.zeros(shape[:2], dtype=bool)
    mask[ix, iy] = True
    with publishing(store, overwrite) as publication:
        staging = os.fspath(publication.staging)
        cube = new_store(
            Path(staging), shape, dtype, dims=["x", "y", "mz"], coords={"x": xs, "y": ys, "mz": mz},
            chunks=chunks, shards=shards, compress=compress, cache=max(limit // 2, 1), attributes=attributes,
            fill_value=0, identified=True,
        )  # fmt: skip
        with cube:
            if not (imzml.intensity.zlib or imzml.mz.zlib):
                cube.close()
                main = os.path.join(staging, MAIN_ARRAY)
                if binning is None:
                    tic, total = _fill_in_engine(main, imzml, (ix, iy), shape, limit, progress)
                else:
                    tic, total = _bin_in_engine(
                        main, imzml, binning, (ix, iy), shape, limit, progress, report
                    )
            else:
                rows = _Rows(spectra, binning, report)
                tic, total = _fill_in_slabs(cube.amplitude, rows, (ix, iy), shape, shards, limit, progress)
        peaks = int(imzml.mz_length.sum())
        if binning is not None and report["outside_range"] == peaks > 0:  # the cube would be all zeros
            raise InvalidInputError(
                f"{path}: every one of its {peaks:,} peaks lies outside the m/z range {binning.low:g}.."
                f"{binning.high:g}; give a range that holds some, or no range to bin them all"
            )
        # Window writes count the cube's data version from here on: the sums say which version they add up.
        made_from = {"cubeslab": {MADE_FROM: _engine.track_data_version(os.path.join(staging, MAIN_ARRAY))}}
        for name, values, dims, attributes in (
            ("pixel_mask", mask, ["x", "y"], {}),
            ("tic", tic, ["x", "y"], made_from),
            ("mean_spectrum", total / max(int(mask.sum()), 1), ["mz"], made_from),
        ):
            Array.from_numpy(
                os.path.join(staging, name), values, chunks=values.shape, dimension_names=dims,
                attributes=attributes,
            )  # fmt: skip
        written_views = _write_views(staging, shape, dtype, views or [], compress, limit)
        if written_views:
            report["views"] = written_views
            report["volume_bytes"] = store_size(Path(staging, MAIN_ARRAY))  # what a view adds is set beside
        # Marked complete (and its views listed) only now; the store is published whole below.
        record = {
            "state": COMPLETE,
            "views": written_views,
            "stored_bytes": store_size(Path(staging, MAIN_ARRAY)),
        }
        _engine.add_group_attributes(staging, zarr_json({"cubeslab": record}))
        digest.check()  # a checksum that disagrees stops the ingest here: nothing is published
        report |= summary(path, store, shape, dtype, chunks, shards, layout, access, staging)
        publication.commit(durable)
        return report
