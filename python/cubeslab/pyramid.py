"""Overview levels (a pyramid): copies of a store's main array downsampled 2x per level along chosen
axes, until the largest side fits ``max_side``, so that a whole plane of a huge survey can be seen at
screen resolution without reading it all.

Each level is an array of the store's group (``amplitude_level1``, ...), written from the one before it
with window writes, a slab of whole shards at a time. The group's attributes describe them with the
OME-Zarr ``multiscales`` convention (datasets with scale transforms), so other multiscale viewers open
them, and in ``cubeslab.pyramid`` with the main array's data version they were made from: a window
write to the main array counts a new version, and the levels are then stale (readers skip them,
``verify`` reports them) until the pyramid is built again.

Downsampling: ``mean`` (the default) averages each 2x block, ignoring missing values (NaN); as a box
filter it removes what would alias onto the coarser grid, so dipping reflectors stay continuous lines
with their sign, at the cost of some amplitude of the finest detail. ``decimate`` keeps every other
sample: true amplitudes and signs, but steep dips and high frequencies alias into false events.
"""

from __future__ import annotations

import math
import os
import shutil
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _engine, defaults
from .array import Array, zarr_json
from .errors import InvalidInputError
from .locations import local_only
from .overviews import Level, data_version, level_name, recorded_levels

METHODS = ("mean", "decimate")
OME_VERSION = "0.5"


def level_shapes(shape, axes: tuple[int, ...], max_side: int) -> list[tuple[int, ...]]:
    """The shapes of the levels below ``shape``: halved (rounding up) along ``axes`` until every one of
    them is at most ``max_side`` long."""
    shapes: list[tuple[int, ...]] = []
    current = tuple(shape)
    while max(current[a] for a in axes) > max_side:
        current = tuple(-(-n // 2) if d in axes else n for d, n in enumerate(current))
        shapes.append(current)
    return shapes


def downsample(block: np.ndarray, axes: tuple[int, ...], method: str) -> np.ndarray:
    """``block`` halved along ``axes``: each pair averaged (NaN ignored; an odd end kept alone), or every
    other element kept."""
    if method == "decimate":
        return block[tuple(slice(None, None, 2) if d in axes else slice(None) for d in range(block.ndim))]
    values = block.astype(np.float64)
    for axis in axes:
        n = values.shape[axis]
        if n % 2:
            pad = [(0, 0)] * values.ndim
            pad[axis] = (0, 1)
            values = np.pad(values, pad, constant_values=np.nan)
        shape = (*values.shape[:axis], -(-n // 2), 2, *values.shape[axis + 1 :])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN pair stays NaN
            values = np.nanmean(values.reshape(shape), axis=axis + 1)
    if np.issubdtype(block.dtype, np.integer):
        return np.rint(values).astype(block.dtype)
    return values.astype(block.dtype)


def build_pyramid(
    store: str | os.PathLike,
    *,
    axes=None,
    method: str = "mean",
    max_side: int = defaults.PYRAMID_MAX_SIDE,
    memory_limit: int | None = None,
) -> dict:
    """Write the overview levels of ``store`` (replacing earlier ones); returns their description.

    axes: the dimensions halved per level, by name or number (default: every one).
    method: ``"mean"`` or ``"decimate"`` (see the module's documentation for why mean is the default).
    max_side: levels are added until no chosen axis is longer than this.
    memory_limit: bytes for the slabs read and the write cache (default: ingest's memory limit).
    """
    from .opener import open as open_store

    path = local_only(store, "writing overview levels")
    if method not in METHODS:
        raise InvalidInputError(f"method={method!r}: use one of {', '.join(METHODS)}")
    if max_side < 1:
        raise InvalidInputError(f"max_side={max_side}: levels need a positive side")
    cube = open_store(path)
    main = cube.amplitude
    if main.path == os.fspath(path):
        raise InvalidInputError(
            f"{path}: a lone array has no group to hold overview levels; ingest it, or create it with coords="
        )
    chosen = tuple(
        sorted({cube.dims.index(a) if isinstance(a, str) else int(a) for a in (axes or cube.dims)})
    )
    if not chosen or any(a < 0 or a >= main.ndim for a in chosen):
        raise InvalidInputError(f"axes={axes!r}: name dimensions of {path} ({', '.join(cube.dims)})")
    version = _engine.track_data_version(main.path)  # window writes count it from now on
    limit = int(memory_limit or defaults.MEMORY_LIMIT)
    main_name = os.path.basename(main.path)
    levels: list[Level] = []
    source = main
    for number, shape in enumerate(level_shapes(main.shape, chosen, max_side), start=1):
        target = new_level(path, main, level_name(main_name, number), shape, limit)
        fill_level(source, target, chosen, method, limit)
        factors = tuple(2**number if d in chosen else 1 for d in range(main.ndim))
        levels.append(Level(os.path.basename(target.path), factors))
        source = Array(target.path)
    description = describe_levels(cube, main_name, levels, method, version)
    _engine.add_group_attributes(os.fspath(path), zarr_json(description))
    return description


def new_level(store, main: Array, name: str, shape, limit: int) -> Array:
    """An empty level array: the main array's inner chunks and codec, clipped to its shape."""
    chunks = tuple(min(c, n) for c, n in zip(main.chunks, shape, strict=True))
    shards = (
        None if main.shards is None else tuple(min(s, n) for s, n in zip(main.shards, shape, strict=True))
    )
    if shards is not None:
        chunks = tuple(min(c, s) for c, s in zip(chunks, shards, strict=True))
        shards = tuple(s - s % c for s, c in zip(shards, chunks, strict=True))
    inner = inner_codecs(main)
    level_path = os.path.join(os.fspath(store), name)
    if os.path.exists(level_path):
        shutil.rmtree(level_path)
    Array.create(
        level_path, shape, main.dtype, chunks=chunks, shards=shards,
        compress=_engine.compression_name(zarr_json(inner)) or "none",
        dimension_names=main.dimension_names, fill_value=main.metadata.get("fill_value"),
        attributes={"cubeslab": {"overview_of": os.path.basename(main.path)}},
    )  # fmt: skip
    return Array(level_path, cache=max(limit // 2, 1))


SLABS_IN_FLIGHT = 2
"""Slabs read and downsampled at once, beside the one being written."""


def slabs(source: Array, target: Array, axes: tuple[int, ...], method: str, limit: int):
    """``(start, stop, values)``: ``target``'s rows ``start:stop`` along the first dimension computed
    from ``source``, in slabs of whole shards where the memory bound allows; the next slabs are read
    and downsampled on other threads meanwhile (the engine's reads and numpy's means release the GIL)."""
    unit = (target.shards or target.chunks)[0]
    factor = 2 if 0 in axes else 1
    plane = math.prod(source.shape[1:]) * source.dtype.itemsize * factor
    # Half the bound for the slabs in flight (and their float64 means), half for the write cache.
    rows = max(1, min(target.shape[0], (limit // (4 * (SLABS_IN_FLIGHT + 1))) // max(plane, 1)))
    rows = max(unit, rows - rows % unit) if rows >= unit else rows

    def compute(start: int) -> tuple[int, int, np.ndarray]:
        stop = min(start + rows, target.shape[0])
        block = source[start * factor : min(stop * factor, source.shape[0])]
        return start, stop, downsample(block, axes, method)

    with ThreadPoolExecutor(SLABS_IN_FLIGHT) as pool:
        pending: deque = deque()
        for start in range(0, target.shape[0], rows):
            pending.append(pool.submit(compute, start))
            if len(pending) > SLABS_IN_FLIGHT:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def fill_level(source: Array, target: Array, axes: tuple[int, ...], method: str, limit: int) -> None:
    """Write ``target``: ``source`` halved along ``axes``."""
    with target:
        for start, stop, values in slabs(source, target, axes, method, limit):
            target[start:stop] = values


def check_pyramid(store: str | os.PathLike, memory_limit: int | None = None) -> dict | None:
    """Whether ``store``'s overview levels hold what its data makes now (``None``: it has none): stale
    ones (the data written since), and, for lossless codecs, each level computed again from the one
    before and compared. ``problems`` lists what is wrong."""
    from .opener import open as open_store

    cube = open_store(local_only(store, "checking overview levels"))
    record = cube.attributes.get("cubeslab", {}).get("pyramid")
    if not record:
        return None
    main, problems = cube.amplitude, []
    levels = recorded_levels(record)
    if record.get("made_from_data_version") != data_version(main.metadata):
        problems.append(
            "stale: the data was written after the levels were made; run `cubeslab pyramid` again"
        )
    elif is_lossy(main):
        pass  # a lossy level differs from the mean of its decoded parent by the codec's error
    else:
        limit, source = int(memory_limit or defaults.MEMORY_LIMIT), main
        for level in levels:
            target = Array(os.path.join(os.fspath(cube.path), level.name))
            axes = tuple(d for d, f in enumerate(level.factors) if f > 1)
            for start, stop, values in slabs(source, target, axes, record["method"], limit):
                if not np.array_equal(target[start:stop], values, equal_nan=True):
                    problems.append(
                        f"{level.name}: rows {start}:{stop} differ from the level above, downsampled"
                    )
                    break
            source = target
    return {"levels": [level.name for level in levels], "method": record["method"], "problems": problems}


def inner_codecs(array: Array) -> list:
    codecs = array.metadata["codecs"]
    return codecs[0]["configuration"]["codecs"] if array.shards is not None else codecs


def is_lossy(array: Array) -> bool:
    """Whether ``array``'s codecs change values (ZFP but its reversible mode, bit rounding)."""
    for codec in inner_codecs(array):
        name, mode = codec["name"], codec.get("configuration", {}).get("mode")
        if ("zfp" in name and mode != "reversible") or "bitround" in name:
            return True
    return False


def describe_levels(cube, main_name: str, levels: list[Level], method: str, version: int) -> dict:
    """The group attributes: OME-Zarr ``multiscales`` and cubeslab's own record."""
    ndim = cube.amplitude.ndim
    datasets = [{"path": main_name, "coordinateTransformations": [{"type": "scale", "scale": [1.0] * ndim}]}]
    for level in levels:
        scale = [float(f) for f in level.factors]
        datasets.append(
            {"path": level.name, "coordinateTransformations": [{"type": "scale", "scale": scale}]}
        )
    return {
        "ome": {
            "version": OME_VERSION,
            "multiscales": [
                {
                    "name": main_name,
                    "axes": [{"name": dim, "type": "space"} for dim in cube.dims],
                    "datasets": datasets,
                    "type": method,
                }
            ],
        },
        "cubeslab": {
            "pyramid": {
                "method": method,
                "levels": [{"array": level.name, "factors": list(level.factors)} for level in levels],
                "made_from_data_version": version,
            }
        },
    }
