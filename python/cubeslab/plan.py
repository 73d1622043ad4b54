"""Layout planning: measuring device profiles, and plans for new and existing stores.

A profile is measured once per filesystem (``cubeslab profile PATH``) and saved
(:mod:`cubeslab.profiles` says where, and finds it). An ingest of a large source
onto a filesystem without one measures a quick profile first (a few seconds,
once; ``CUBESLAB_AUTO_PROFILE=0`` turns this off). Otherwise plans use the
engine's built-in typical machine.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import _engine, defaults
from .errors import InvalidInputError
from .profiles import auto_profile_enabled, find_profile, profile_path

PROFILE_CODECS = ("zstd:1", "zstd:3", "gzip:5", "blosc-lz4:5", "blosc-zstd:5", "zfp:rate=8", "zfp:rate=4")
"""Codecs a profile times (names as ``--compress`` takes them)."""

QUICK_FILE_BYTES, QUICK_CELL_SECONDS = 128 << 20, 0.03
"""Settings of ``--quick``: a smaller scratch file and shorter cells (about 10 s on a 2-core VM)."""

AUTO_PROFILE_MIN_BYTES = 256 << 20
"""Sources at least this large get a quick profile of their store's filesystem measured before
they are planned, when none is saved: a layout planned for the wrong machine costs such a volume
more read time than the measurement takes."""


def measure_profile(
    path: str | os.PathLike,
    *,
    output: str | os.PathLike | None = None,
    quick: bool = False,
    threads: int | None = None,
) -> dict:
    """Measure the filesystem holding ``path`` and the cores; save and return the profile.

    output: where to save it (default: :func:`profile_path`). quick: about 10 s instead of 30.
    """
    from .synthetic import SyntheticSurvey

    directory = Path(path)
    if not directory.is_dir():
        raise InvalidInputError(f"{directory}: not a directory to profile")
    sample = SyntheticSurvey(64, 64, 256, seed=3).block(0, 64)
    text = _engine.measure_profile(
        os.fspath(directory),
        sample.reshape(-1).view(np.uint8),
        [64, 64, 256],
        "float32",
        codecs=list(PROFILE_CODECS),
        threads=threads,
        file_bytes=QUICK_FILE_BYTES if quick else None,
        cell_seconds=QUICK_CELL_SECONDS if quick else None,
    )
    profile = json.loads(text)
    # What a read call costs as users make it: from Python, with the key
    # parsed and a new output array (the engine measured its own part only).
    profile["engine"]["call"] = max(profile["engine"]["call"], _python_call_seconds(directory))
    profile["host"] = platform.node()
    profile["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    profile["quick"] = quick
    target = Path(output) if output is not None else profile_path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(profile, indent=1))
    tmp.replace(target)
    profile["saved_to"] = str(target)
    return profile


def _python_call_seconds(directory: Path) -> float:
    """Median time of a one-element ``Array.read`` on a small resident array."""
    import shutil
    import statistics
    import tempfile

    from .array import Array

    scratch = Path(tempfile.mkdtemp(prefix=".cubeslab-call-", dir=directory))
    try:
        zeros = np.zeros((16, 16, 16), np.float32)
        array = Array.from_numpy(scratch / "a.zarr", zeros, chunks=(16, 16, 16), shards=(16, 16, 16))
        array.read((1, 2, slice(3, 4)))
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(200):
                array.read((1, 2, slice(3, 4)))
            times.append((time.perf_counter() - t0) / 200)
        return statistics.median(times)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def profile_for_ingest(
    store: str | os.PathLike, profile: str | os.PathLike | None, source_bytes: int
) -> tuple[str | None, bool]:
    """The profile text to plan an ingest into ``store`` with, and whether it was measured just now:
    the one :func:`find_profile` finds, else for a source of at least
    :data:`AUTO_PROFILE_MIN_BYTES` a quick profile of the store's filesystem (saved for next time),
    else None (the built-in typical machine)."""
    text = find_profile(store, profile)
    if text is not None or source_bytes < AUTO_PROFILE_MIN_BYTES or not auto_profile_enabled():
        return text, False
    directory = Path(store).absolute().parent
    while not directory.exists():
        directory = directory.parent
    measured = measure_profile(directory, quick=True)
    measured.pop("saved_to", None)
    return json.dumps(measured), True


def check_layout(layout: str) -> None:
    """Raise ValueError naming the problem if ``layout`` is not a strategy name or shape."""
    _engine.check_layout(layout)


def check_access(access: str) -> None:
    """Raise ValueError naming the problem if ``access`` is not a list of accesses
    (``inline,time=2``); whether they fit the array's dimensions is checked when it is known."""
    _engine.check_access(access)


def check_compress(compress: str) -> None:
    """Raise ValueError naming the problem if ``compress`` is not a compression name."""
    _engine.check_compress(compress)


def check_dtype(dtype: str) -> None:
    """Raise ValueError unless ``dtype`` is ``native`` or an element type the engine stores."""
    if dtype == "native":
        return
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = dtype
    if name not in _engine.dtypes():
        raise ValueError(f"dtype {dtype!r}: use native or one of {', '.join(_engine.dtypes())}")


def plan(
    shape,
    dtype="float32",
    *,
    layout: str = defaults.LAYOUT,
    access: str | None = None,
    compress: str | None = None,
    profile: str | os.PathLike | None = None,
    near: str | os.PathLike | None = None,
    threads: int | None = None,
    in_flight: int | None = None,
    verify: bool = True,
    state: str = defaults.PLAN_STATE,
    top: int = defaults.PLAN_TOP,
    memory_limit: int | None = None,
) -> list[dict]:
    """Plan a layout for an array; the pick first, then runners-up (``layout="auto"`` only).
    ``memory_limit``: an ingest's bound in bytes, which its shards must fit.

    Each entry: ``layout`` (``inner``, ``shard``), ``score`` (the objective, seconds:
    the slowest weighted access warm times ``weights["warm"]`` plus the slowest
    cold times ``weights["cold"]``), ``weights``, ``padding``, ``chunks``,
    ``shards`` and ``accesses``: per access its ``warm`` and ``cold`` predictions
    (``seconds``, ``requests``, ``device_bytes``, ``touched_bytes``,
    ``io_seconds``, ``cpu_seconds`` ...) and its ``objective``: its own weighted
    warm and cold time, weighed alike.

    state: ``"both"`` (the default) weighs warm time by how many times faster
    this machine checks bytes in memory than its device streams them, so a
    tenth slower warm counts as much as a tenth slower cold; ``"warm"`` or
    ``"cold"`` counts that state alone.

    access: reads to plan for, e.g. ``"inline,crossline,time"`` (the default in
    3-D), ``"time=2,trace"``, ``"spectra:5,ion-images:25,box:5x5x1000"``.
    """
    text = _engine.plan_layout(
        [int(n) for n in shape],
        np.dtype(dtype).name,
        layout=layout,
        access=access,
        compress=compress,
        profile=find_profile(near, profile),
        threads=threads,
        in_flight=in_flight,
        verify=verify,
        state=state,
        top=top,
        memory_limit=memory_limit,
    )
    return json.loads(text)


def plan_store(
    path: str | os.PathLike,
    *,
    layout: str = "auto",
    access: str | None = None,
    compress: str | None = None,
    profile: str | os.PathLike | None = None,
    state: str = defaults.PLAN_STATE,
    top: int = defaults.PLAN_TOP,
) -> dict:
    """Plan a layout for a store's volume and set it beside the layouts the store has.

    Returns ``plans`` (as :func:`plan` with ``layout``, the pick first) and
    ``store``: its ``shape``, ``dtype``, ``compression``, ``source`` (the file
    it was ingested from, or None), ``copies`` (the volume, then each
    ``--views`` copy: ``name``, ``layout`` and that layout's ``plan``) and
    ``score``: the slowest weighted access when each access reads from its
    fastest copy, as the reader routes it. ``compress`` defaults to the
    store's own compression.
    """
    from .array import Array
    from .cube import Cube

    store = Path(path)
    cube = Cube(store)
    extra = cube.attributes.get("cubeslab", {})
    compress = compress or extra.get("compression", {}).get("codec") or _compression_of(cube.amplitude)
    arrays = [("volume", cube.amplitude)] + [
        (f"{name} view", Array(store / view["array"])) for name, view in extra.get("views", {}).items()
    ]

    def plan_with(layout: str, top: int) -> list[dict]:
        return plan(
            cube.shape,
            cube.dtype,
            layout=layout,
            top=top,
            access=access,
            compress=compress,
            profile=profile,
            near=store,
            state=state,
        )

    copies: list[dict[str, Any]] = []
    for name, array in arrays:
        chunks = "x".join(map(str, array.chunks))
        shards = "x".join(map(str, array.shards or array.chunks))
        (layout_plan,) = plan_with(f"{chunks}/{shards}", 1)
        copies.append({"name": name, "layout": f"{chunks}/{shards}", "plan": layout_plan})
    plans = plan_with(layout, top)

    score = routed_score([c["plan"] for c in copies])
    return {
        "plans": plans,
        "store": {
            "shape": list(cube.shape),
            "dtype": str(cube.dtype),
            "compression": compress,
            "source": extra.get("source"),
            "copies": copies,
            "score": score,
        },
    }


def routed_score(copies: list[dict]) -> float:
    """The objective of a store whose copies have these plans (all with the same accesses and
    weights): each access read from the copy where it costs least, as the reader routes it, then
    the slowest of them warm and cold, weighed as the plans weigh the two states."""
    weights = copies[0]["weights"]
    routed = [
        min(same, key=lambda a: a["objective"]) for same in zip(*(c["accesses"] for c in copies), strict=True)
    ]
    return sum(
        weights[state] * max(a["weight"] * a[state]["seconds"] for a in routed) for state in ("warm", "cold")
    )


def _compression_of(array) -> str:
    """``--compress`` naming of an array's codecs, for stores whose compression cubeslab did not record."""
    codecs = list(array.metadata.get("codecs", []))
    names = []
    while codecs:
        codec = codecs.pop()
        if codec["name"] == "sharding_indexed":
            codecs.extend(codec["configuration"]["codecs"])
        elif codec["name"] not in ("bytes", "crc32c", "transpose"):
            names.append(codec)
    if not names:
        return "none"
    if len(names) == 1 and names[0]["name"] in ("zstd", "gzip"):
        level = names[0].get("configuration", {}).get("level") or (3 if names[0]["name"] == "zstd" else 5)
        return f"{names[0]['name']}:{level}"
    blosc = names[0].get("configuration", {}) if len(names) == 1 and names[0]["name"] == "blosc" else {}
    if blosc.get("cname") in ("lz4", "zstd"):  # MDIO writes blosc (zstd, level 5, byte shuffle)
        shuffle = {"shuffle": "", "bitshuffle": ",shuffle=bit", "noshuffle": ",shuffle=none"}
        kind = blosc.get("shuffle", "shuffle")
        if kind in shuffle:
            name = f"blosc-{blosc['cname']}:{blosc.get('clevel', 5)}{shuffle[kind]}"
            check_compress(name)
            return name
    raise InvalidInputError(
        f"{array.path}: codecs {[c['name'] for c in names]} were not written by cubeslab; "
        "say which compression to plan with (--compress)"
    )
