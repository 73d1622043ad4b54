"""Overview levels (a pyramid): copies of a store's main array downsampled 2x per level along chosen
axes, until the largest side fits ``max_side``, so that a whole plane of a huge survey can be seen at
screen resolution without reading it all.

Each level is an array in a group beside the main array (``amplitude_levels/1``, ...; a group of
their own, so that xarray's ``open_zarr`` of the store leaves them out), written from the one before it
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
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _engine, defaults, schema
from .array import Array, zarr_json
from .errors import InvalidInputError, OptionError
from .locations import local_only
from .overviews import MADE_FROM, Level, data_version, level_name, levels_group, recorded_levels
from .sources import fill_attribute

METHODS = ("mean", "decimate")
OME_VERSION = "0.5"
OME_SPACE_AXES = (2, 3)
"""How many space axes OME-Zarr multiscales allow."""


def level_shapes(shape, axes: tuple[int, ...], max_side: int) -> list[tuple[int, ...]]:
    """The shapes of the levels below ``shape``: halved (rounding up) along ``axes`` until every one of
    them is at most ``max_side`` long."""
    shapes: list[tuple[int, ...]] = []
    current = tuple(shape)
    while max(current[a] for a in axes) > max_side:
        current = tuple(-(-n // 2) if d in axes else n for d, n in enumerate(current))
        shapes.append(current)
    return shapes


def missing_values(array: Array) -> tuple:
    """The values that mark an element missing in ``array``, as CF says (its ``_FillValue`` and
    ``missing_value`` attributes; a NetCDF ingest keeps them): left out of a level's means."""
    attributes = array.attributes
    marks = []
    if "_FillValue" in attributes:
        marks.append(fill_attribute.decode(attributes["_FillValue"], array.dtype))
    if "missing_value" in attributes:
        listed = attributes["missing_value"]
        marks.extend(
            fill_attribute.decode(v, array.dtype) for v in (listed if isinstance(listed, list) else [listed])
        )
    return tuple(m for m in marks if isinstance(m, (int, float, np.number)) and not np.isnan(m))


def downsample(block: np.ndarray, axes: tuple[int, ...], method: str, missing: tuple = ()) -> np.ndarray:
    """``block`` halved along ``axes``: each 2x block averaged as a whole (missing values, NaN and those
    ``missing`` marks, left out; a block at an odd end holds fewer elements; a block with none left holds
    the first mark, else NaN), or every other element kept."""
    if method == "decimate":
        return block[tuple(slice(None, None, 2) if d in axes else slice(None) for d in range(block.ndim))]
    # Each halved axis split in two: (blocks, 2); an odd end is padded, and the pad marked not valid.
    pad = [(0, n % 2 if d in axes else 0) for d, n in enumerate(block.shape)]
    split = tuple(
        size for d, n in enumerate(block.shape) for size in (((n + 1) // 2, 2) if d in axes else (n,))
    )
    pairs = tuple(d + sum(1 for a in axes if a <= d) for d in axes)  # the length-2 axes in ``split``
    valid = np.pad(~np.isin(block, missing) if missing else np.ones(block.shape, bool), pad).reshape(split)
    if np.issubdtype(block.dtype, np.integer):
        mean = _integer_mean(np.pad(block, pad).reshape(split), valid, pairs)
        none_left = ~valid.any(axis=pairs)
        return np.where(none_left, missing[0] if missing else 0, mean).astype(block.dtype)
    values = np.pad(block.astype(np.float64), pad).reshape(split)
    if block.dtype.kind == "f":
        valid &= ~np.isnan(values)
    count = valid.sum(axis=pairs)
    total = np.where(valid, values, 0.0).sum(axis=pairs)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count  # a block with no value left stays NaN
    if missing:
        mean = np.where(count == 0, missing[0], mean)
    return (np.rint(mean) if block.dtype == bool else mean).astype(block.dtype)


def _integer_mean(values: np.ndarray, valid: np.ndarray, pairs: tuple[int, ...]) -> np.ndarray:
    """The mean of each block of integers, rounded half to even, exact for every 64-bit value: each
    element is split as ``q * n + r`` (``n`` the block's count, ``0 <= r < n``), so the sums of ``q``
    and of ``r`` never overflow, and the mean is ``sum(q) + sum(r) / n``."""
    wide = np.uint64 if values.dtype == np.uint64 else np.int64
    count = np.maximum(valid.sum(axis=pairs, keepdims=True), 1).astype(wide)  # none valid: the caller's
    values = np.where(valid, values.astype(wide), 0)
    q, r = np.divmod(values, count)
    whole = np.where(valid, q, 0).sum(axis=pairs, dtype=wide)
    rest = np.where(valid, r, 0).sum(axis=pairs, dtype=wide)
    count = count.squeeze(axis=pairs)
    steps, left = np.divmod(rest, count)
    mean = whole + steps
    up = (2 * left > count) | ((2 * left == count) & (mean % 2 == 1))
    return mean + up.astype(wide)


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
        raise OptionError(f"method={method!r}: use one of {', '.join(METHODS)}")
    if max_side < 1:
        raise InvalidInputError(f"max_side={max_side}: levels need a positive side")
    cube = open_store(path)
    main = cube.amplitude
    if main.path == os.fspath(path):
        raise InvalidInputError(
            f"{path}: a lone array has no group to hold overview levels; ingest it, or create it with coords="
        )
    chosen = chosen_axes(axes, cube.dims, path)
    version = _engine.track_data_version(main.path)  # window writes count it from now on
    limit = int(memory_limit or defaults.MEMORY_LIMIT)
    main_name = os.path.basename(main.path)
    # Readers stop using the levels before any is touched, so a rebuild that stops midway leaves none
    # that look current; the levels of an earlier build go, however many it made.
    _engine.add_group_attributes(os.fspath(path), zarr_json({"ome": None, "cubeslab": {"pyramid": None}}))
    group = os.path.join(path, levels_group(main_name))
    shutil.rmtree(group, ignore_errors=True)
    levels: list[Level] = []
    source = main
    try:
        _engine.create_group(group, None)
        for number, shape in enumerate(level_shapes(main.shape, chosen, max_side), start=1):
            target = new_level(path, main, level_name(main_name, number), shape, method, limit)
            levels.append(
                Level(
                    level_name(main_name, number),
                    tuple(2**number if d in chosen else 1 for d in range(main.ndim)),
                )
            )
            fill_level(source, target, chosen, method, limit)
            source = Array(target.path)
    except BaseException:  # an error or Ctrl-C: no level of this build stays (a kill leaves them unrecorded)
        shutil.rmtree(group, ignore_errors=True)
        raise
    description = describe_levels(cube, main_name, levels, method, version)
    _engine.add_group_attributes(os.fspath(path), zarr_json(description))
    return description


def chosen_axes(axes, dims: list[str], path) -> tuple[int, ...]:
    """The dimensions ``axes`` names (names, numbers, or numbers as text), sorted; all if None."""
    if axes is None:
        return tuple(range(len(dims)))
    chosen = set()
    for axis in axes:
        if isinstance(axis, str) and axis in dims:
            chosen.add(dims.index(axis))
        elif isinstance(axis, (int, str)) and str(axis).isdecimal() and int(axis) < len(dims):
            chosen.add(int(axis))
        else:
            raise OptionError(
                f"axes: {axis!r} is not a dimension of {path} ({', '.join(dims)}, or 0 to {len(dims) - 1})"
            )
    if not chosen:
        raise OptionError(f"axes: name at least one dimension of {path} ({', '.join(dims)})")
    return tuple(sorted(chosen))


def new_level(store, main: Array, name: str, shape, method: str, limit: int) -> Array:
    """An empty level array: the main array's inner chunks and codec, clipped to its shape; it records
    ``method``, which tells readers which planes it holds."""
    chunks = tuple(min(c, n) for c, n in zip(main.chunks, shape, strict=True))
    shards = (
        None if main.shards is None else tuple(min(s, n) for s, n in zip(main.shards, shape, strict=True))
    )
    if shards is not None:
        chunks = tuple(min(c, s) for c, s in zip(chunks, shards, strict=True))
        shards = tuple(s - s % c for s, c in zip(shards, chunks, strict=True))
    inner = inner_codecs(main)
    # What says how to read the values (CF's packing and fill marks, units) holds for a level's too.
    described = {
        k: v
        for k, v in main.attributes.items()
        if not schema.is_bookkeeping(k, v) and k not in (schema.STATS_V1, "coordinates")
    }
    level_path = os.path.join(os.fspath(store), name)
    Array.create(
        level_path, shape, main.dtype, chunks=chunks, shards=shards,
        compress=_engine.compression_name(zarr_json(inner)) or "none",
        dimension_names=main.dimension_names, fill_value=main.metadata.get("fill_value"),
        attributes=described | {"cubeslab": {"overview_of": os.path.basename(main.path), "method": method}},
    )  # fmt: skip
    return Array(level_path, cache=max(limit // 2, 1))


SLABS_IN_FLIGHT = 2
"""Slabs read and downsampled at once, beside the one being written."""


def slabs(source: Array, target: Array, axes: tuple[int, ...], method: str, limit: int):
    """``(window, values)``: ``target[window]`` computed from ``source``, in slabs of whole shards along
    the first dimension, as many as the memory bound allows; when one row of shards is beyond it, split
    along the second dimension too, still in whole shards (the writer's unit: a lossy codec takes
    nothing less). The next slabs are read and downsampled on other threads meanwhile (the engine's
    reads and numpy's means release the GIL)."""
    factors = [2 if d in axes else 1 for d in range(source.ndim)]
    missing = missing_values(source)
    unit = target.shards or target.chunks
    # Half the bound for the slabs in flight (and their float64 means), half for the write cache.
    budget = limit // (4 * (SLABS_IN_FLIGHT + 1))
    row_bytes = math.prod(source.shape[1:]) * source.dtype.itemsize * factors[0]
    rows = max(unit[0], budget // max(row_bytes, 1) // unit[0] * unit[0])
    columns = target.shape[1] if target.ndim > 1 else 1
    if rows == unit[0] and target.ndim > 1:
        column_bytes = row_bytes // source.shape[1] * factors[1] * rows
        columns = max(unit[1], budget // max(column_bytes, 1) // unit[1] * unit[1])

    def compute(window: tuple[slice, ...]) -> tuple[tuple[slice, ...], np.ndarray]:
        block = source[
            tuple(
                slice(w.start * f, min(w.stop * f, n))
                for w, f, n in zip(window, factors, source.shape, strict=False)
            )
        ]
        return window, downsample(block, axes, method, missing)

    tiles: list[tuple[slice, ...]] = []
    for r in range(0, target.shape[0], rows):
        band = slice(r, min(r + rows, target.shape[0]))
        if target.ndim == 1:
            tiles.append((band,))
        for c in range(0, target.shape[1], columns) if target.ndim > 1 else ():
            tiles.append((band, slice(c, min(c + columns, target.shape[1]))))
    with ThreadPoolExecutor(SLABS_IN_FLIGHT) as pool:
        pending: deque = deque()
        for window in tiles:
            pending.append(pool.submit(compute, window))
            if len(pending) > SLABS_IN_FLIGHT:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def fill_level(source: Array, target: Array, axes: tuple[int, ...], method: str, limit: int) -> None:
    """Write ``target``: ``source`` halved along ``axes``."""
    with target:
        for window, values in slabs(source, target, axes, method, limit):
            target[window] = values


def check_pyramid(
    store: str | os.PathLike, memory_limit: int | None = None, *, compare: bool = True
) -> dict | None:
    """Whether ``store``'s overview levels hold what its data makes now (``None``: it has none): stale
    ones (the data written since), levels a killed build left, and, for lossless codecs and with
    ``compare``, each level computed again from the one before and compared. ``problems`` lists what
    is wrong."""
    from .opener import open as open_store

    cube = open_store(local_only(store, "checking overview levels"))
    record = cube.attributes.get("cubeslab", {}).get("pyramid")
    if not record:
        leftover = unrecorded_levels(cube)
        return {"levels": [], "method": "none", "problems": [leftover]} if leftover else None
    main, problems = cube.amplitude, []
    levels = recorded_levels(record)
    if record.get(MADE_FROM) != data_version(main.metadata):
        problems.append(
            "stale: the data was written after the levels were made; run `cubeslab pyramid` again"
        )
    elif is_lossy(main) or not compare:
        pass  # a lossy level differs from the mean of its decoded parent by the codec's error
    else:
        limit, source = int(memory_limit or defaults.MEMORY_LIMIT), main
        for level in levels:
            target = Array(os.path.join(os.fspath(cube.path), level.name))
            axes = tuple(d for d, f in enumerate(level.factors) if f > 1)
            for window, values in slabs(source, target, axes, record["method"], limit):
                if not np.array_equal(target[window], values, equal_nan=True):
                    where = ", ".join(f"{w.start}:{w.stop}" for w in window)
                    problems.append(f"{level.name}: [{where}] differs from the level above, downsampled")
                    break
            source = target
    return {"levels": [level.name for level in levels], "method": record["method"], "problems": problems}


def level_arrays(store, main_name: str) -> list[str]:
    """The overview levels of ``main_name`` that ``store`` holds (paths in it), recorded or not."""
    group = os.path.join(store, levels_group(main_name))
    if not os.path.isdir(group):
        return []
    numbers = sorted(int(e.name) for e in os.scandir(group) if e.is_dir() and e.name.isdecimal())
    return [level_name(main_name, n) for n in numbers]


def unrecorded_levels(cube) -> str | None:
    """What to say of overview level arrays the group does not record (a build killed midway), if any."""
    names = level_arrays(cube.path, os.path.basename(cube.amplitude.path))
    if not names:
        return None
    return (
        f"{', '.join(names)}: left by a build that did not finish (readers do not use them); run "
        "`cubeslab pyramid` again to replace them"
    )


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
    """The group attributes: cubeslab's own record, and OME-Zarr ``multiscales`` where the array fits
    them. OME-Zarr wants 2 or 3 space axes, last, after any time or channel axis; cubeslab cannot tell
    those apart, so a 2-D or 3-D array's axes are all space, and other arrays get no ``ome`` (a 4-D
    survey's offset axis sits between its space axes)."""
    ndim = cube.amplitude.ndim
    datasets = [{"path": main_name, "coordinateTransformations": [{"type": "scale", "scale": [1.0] * ndim}]}]
    for level in levels:
        transforms: list[dict] = [{"type": "scale", "scale": [float(f) for f in level.factors]}]
        if method == "mean":  # a mean's sample sits at the centre of the block it averages
            transforms.append({"type": "translation", "translation": [(f - 1) / 2 for f in level.factors]})
        datasets.append({"path": level.name, "coordinateTransformations": transforms})
    ome = {
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
    }
    return (ome if ndim in OME_SPACE_AXES else {}) | {
        "cubeslab": {
            "pyramid": {
                "method": method,
                "levels": [{"array": level.name, "factors": list(level.factors)} for level in levels],
                MADE_FROM: version,
            }
        },
    }
