"""The MSI-like cube of the ``openmsi`` study and its layouts: the generated data (x, y, m/z), writing
and opening a layout in cubeslab or HDF5, the study's random selections, and timing them on first
access and sustained."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import cubeslab

from .measure import cold_runs, files_under, remove, stats, timed
from .study import StudyRun

SEED = 3
PAGE = 4096
CASES = ("z-slices", "spectra", "subcube")
TOOL_LABELS = {"cubeslab": "cubeslab", "h5py": "HDF5"}
CASE_LABELS = {
    "z-slices": "25 m/z slices [:, :, z:z+25]",
    "spectra": "5 x 5 spectra [x:x+5, y:y+5, :]",
    "subcube": "5 x 5 x 1000 sub-cube",
}

# The study's minimum criteria (section "Summary"), for the 100 x 100 x 100000 cube of 2000 MB.
CRITERIA_S = {"z-slices": 0.1, "spectra": 0.05, "subcube": 0.002}


# -- the generated cube ----------------------------------------------------------------------------


def _tissue_maps(nx: int, ny: int, rng: np.random.Generator, components: int = 5) -> np.ndarray:
    """Smooth abundance maps in [0, 1] over the section (regions of tissue), one per component; the
    first covers the whole section with a gradient (matrix signal)."""
    u, v = np.meshgrid((np.arange(nx) + 0.5) / nx, (np.arange(ny) + 0.5) / ny, indexing="ij")
    maps = [0.5 + 0.5 * (0.6 * u + 0.4 * v)]
    for _ in range(components - 1):
        m = np.zeros((nx, ny))
        for _ in range(2):
            cx, cy = rng.uniform(0.1, 0.9, 2)
            radius = rng.uniform(0.15, 0.35)
            m += np.exp(-((u - cx) ** 2 + (v - cy) ** 2) / (2 * radius**2))
        maps.append(m / m.max())
    return np.stack(maps)


def _peak_profiles(nz: int, peaks: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The m/z bins peaks touch and each peak's expected counts there at full abundance (Gaussian
    peaks a few bins wide, heights log-normal: a few intense peaks, many weak ones)."""
    centres = np.sort(rng.choice(np.arange(8, nz - 8), size=peaks, replace=False))
    widths = rng.uniform(0.8, 2.5, peaks)
    heights = rng.lognormal(mean=3.5, sigma=1.2, size=peaks)
    reach = np.ceil(3 * widths).astype(int)
    bins = np.unique(
        np.concatenate([np.arange(c - h, c + h + 1) for c, h in zip(centres, reach, strict=True)])
    )
    profile = heights[:, None] * np.exp(-0.5 * ((bins[None, :] - centres[:, None]) / widths[:, None]) ** 2)
    profile[profile < 1e-3] = 0.0
    return bins, profile


def msi_cube(shape: tuple[int, int, int], peaks: int, seed: int = SEED) -> np.ndarray:
    """An MSI-like cube of counts: a low Poisson background (chemical noise, higher at low m/z) plus
    peaks at fixed m/z positions whose abundance varies smoothly over the section, each pixel's
    counts Poisson-distributed. Generated in blocks of x rows, each from its own seed."""
    nx, ny, nz = shape
    rng = np.random.default_rng(seed)
    maps = _tissue_maps(nx, ny, rng)
    weights = rng.dirichlet(np.full(len(maps), 0.3), size=peaks)  # most peaks belong to one region
    bins, profile = _peak_profiles(nz, peaks, rng)
    background = 0.05 + 1.2 * np.exp(-np.arange(nz) / (nz / 6))
    abundance = np.einsum("kc,cxy->xyk", weights, maps)
    out = np.empty(shape, dtype=np.uint16)
    rows = max(1, (1 << 24) // (ny * nz))  # int64 draws: at most 128 MiB at a time
    for x0 in range(0, nx, rows):
        block_rng = np.random.default_rng([seed, x0])
        x1 = min(x0 + rows, nx)
        counts = block_rng.poisson(background, size=(x1 - x0, ny, nz))
        expected = abundance[x0:x1].reshape(-1, peaks) @ profile
        counts[:, :, bins] += block_rng.poisson(expected).reshape(x1 - x0, ny, len(bins))
        out[x0:x1] = np.minimum(counts, np.iinfo(np.uint16).max)
    return out


def load_cube(r: StudyRun, p: dict) -> np.ndarray:
    """The generated cube, kept in r.data as .npy and reused by later runs of the same size."""
    shape = tuple(p["shape"])
    path = r.data / f"openmsi-{'x'.join(map(str, shape))}-p{p['peaks']}-s{SEED}.npy"
    if path.is_file():
        return np.load(path)
    data = msi_cube(shape, p["peaks"])
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, data)
    tmp.replace(path)
    return data


# -- layouts: writing, opening, selecting ----------------------------------------------------------


@dataclass
class Layout:
    name: str
    tool: str  # "cubeslab" or "h5py"
    path: Path
    chunks: tuple[int, ...] | None = None  # None: HDF5 contiguous
    shards: tuple[int, ...] | None = None
    compress: str | None = None  # cubeslab's name ("gzip:4"), or "gzip:N" for HDF5's deflate filter

    @property
    def gzip_level(self) -> int | None:
        return (
            int(self.compress.split(":")[1]) if self.compress and self.compress.startswith("gzip") else None
        )

    def files(self) -> list[Path]:
        return files_under(self.path)

    def describe(self) -> str:
        if self.chunks is None:
            return "contiguous"
        text = "x".join(map(str, self.chunks))
        return text + (" / " + "x".join(map(str, self.shards)) if self.shards else "")


def clip(chunks, shape) -> tuple[int, ...]:
    return tuple(min(int(c), int(n)) for c, n in zip(chunks, shape, strict=True))


def clip_shards(shards, chunks, shape) -> tuple[int, ...]:
    """Shards no larger than the array needs, still whole chunks."""
    return tuple(min(s, -(-n // c) * c) for s, c, n in zip(shards, chunks, shape, strict=True))


def write_layout(layout: Layout, data: np.ndarray) -> None:
    """Write the whole cube in one call (HDF5 then compresses chunk by chunk itself)."""
    remove(layout.path)
    if layout.tool == "cubeslab":
        cubeslab.Array.from_numpy(
            layout.path, data, chunks=layout.chunks, shards=layout.shards, compress=layout.compress
        )
        return
    import h5py

    options: dict[str, Any] = {"chunks": layout.chunks} if layout.chunks else {}
    if layout.gzip_level is not None:
        options.update(compression="gzip", compression_opts=layout.gzip_level)
    with h5py.File(layout.path, "w") as f:
        f.create_dataset("data", shape=data.shape, dtype=data.dtype, **options)[...] = data


@contextlib.contextmanager
def opened(layout: Layout):
    """A selection function on a freshly opened handle (closed on exit)."""
    if layout.tool == "cubeslab":
        yield cubeslab.Array(layout.path).__getitem__
        return
    import h5py

    with h5py.File(layout.path, "r") as f:
        yield f["data"].__getitem__


def warm_files(paths: list[Path]) -> None:
    """Bring the files into the page cache (the sustained state: a file read before)."""
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.read(16 << 20):
                pass


# -- selections ------------------------------------------------------------------------------------


def selection_keys(case: str, shape, count: int, seed: int) -> list[tuple[slice, ...]]:
    """``count`` random selections of the study's case (same positions for every layout)."""
    nx, ny, nz = shape
    rng = np.random.default_rng([SEED, seed, CASES.index(case)])
    keys: list[tuple[slice, ...]] = []
    for _ in range(count):
        x, y = int(rng.integers(0, nx - 5 + 1)), int(rng.integers(0, ny - 5 + 1))
        if case == "z-slices":
            z = int(rng.integers(0, nz - 25 + 1))
            keys.append((slice(None), slice(None), slice(z, z + 25)))
        elif case == "spectra":
            keys.append((slice(x, x + 5), slice(y, y + 5), slice(None)))
        else:
            z = int(rng.integers(0, nz - 1000 + 1))
            keys.append((slice(x, x + 5), slice(y, y + 5), slice(z, z + 1000)))
    return keys


def key_bytes(key, shape, itemsize: int = 2) -> int:
    return itemsize * math.prod(len(range(*k.indices(n))) for k, n in zip(key, shape, strict=True))


def chunks_touched(key, shape, chunks) -> int:
    count = 1
    for k, n, c in zip(key, shape, chunks, strict=True):
        start, stop, _ = k.indices(n)
        count *= (stop - 1) // c - start // c + 1
    return count


def contiguous_pages(key, shape, offset: int, itemsize: int = 2) -> int:
    """4 KiB pages a C-order (contiguous) file holds the selection in: one run per (x, y)."""
    (x0, x1, _), (y0, y1, _), (z0, z1, _) = (k.indices(n) for k, n in zip(key, shape, strict=True))
    ny, nz = shape[1], shape[2]
    cells = (np.arange(x0, x1)[:, None] * ny + np.arange(y0, y1)[None, :]).ravel()
    starts = offset + (cells * nz + z0) * itemsize
    ends = offset + (cells * nz + z1) * itemsize - 1
    pages = np.concatenate([np.arange(s // PAGE, e // PAGE + 1) for s, e in zip(starts, ends, strict=True)])
    return len(np.unique(pages))


def cold_bytes(
    layout: Layout, key, shape, file_bytes: int, raw_bytes: int, offset: int, itemsize: int = 2
) -> float:
    """Bytes the device must deliver for a first access: the selection's pages (contiguous), or the
    stored bytes of every chunk it touches (a chunk is read, checksummed or inflated whole)."""
    if layout.chunks is None:
        return contiguous_pages(key, shape, offset, itemsize) * PAGE
    chunk_bytes = itemsize * math.prod(layout.chunks)
    stored_per_raw = file_bytes / raw_bytes if layout.compress not in (None, "none") else 1.0
    return chunks_touched(key, shape, layout.chunks) * chunk_bytes * stored_per_raw


def first_access(layout: Layout, keys: list) -> dict:
    """Each run: the layout's files evicted, the file opened afresh and one selection read (open and
    read timed together: a web request opens the file for each selection)."""
    pending = iter(keys)

    def open_reader():
        key = next(pending)

        def read():
            with opened(layout) as select:
                select(key)

        return read

    return cold_runs(open_reader, layout.files(), len(keys))


def sustained(layout: Layout, keys: list) -> dict:
    """Random selections on one open handle, files in the page cache, each timed; the first selection
    (untimed) lets the handle read its indexes, as any earlier request on an open file would have."""
    warm_files(layout.files())
    with opened(layout) as select:
        select(keys[0])
        return stats([timed(partial(select, k)) for k in keys[1:]])
