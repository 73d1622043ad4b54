"""Study ``peers``: one table a user can trust at a glance. The same generated SEG-Y taken in by every
tool, then the same reads from each: ingest time and MB/s, size on disk, warm and cold inline, crossline,
time slice, trace and 64^3 sub-volume.

Tools: cubeslab (its default layout, and with orientation copies), MDIO, OpenVDS, seismic-zfp, segyio
(the SEG-Y itself), h5py and zarr-python (64^3 chunks, written from memory: they have no SEG-Y reader)
and TensorStore (reading the zarr-python store). Every read is checked against the source volume.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

import cubeslab
from cubeslab.synthetic import SyntheticSurvey

from . import seismic
from .measure import bounds, remove, size_on_disk, stats
from .study import StudyRun, mib, ms, ms_value, ratio

TITLE = "Peers: cubeslab beside today's tools on one survey"
REFERENCES = "the core promise of the Pyrus studies (plane reads from chunked stores) against today's tools"

SIZES = {
    "tiny": {"shape": (40, 48, 64), "scratch": 32 << 20},
    "small": {"shape": (300, 400, 500), "scratch": 256 << 20},
    "medium": {"shape": (600, 800, 1000), "scratch": 512 << 20},
    "large": {"shape": (1200, 1600, 1000), "scratch": 1 << 30},
}

PEER_CHUNKS = 64
"""Chunk side of the h5py and zarr-python stores: the common choice for seismic cubes."""
SEISMIC_ZFP_BITS = 8
"""seismic-zfp stores lossy ZFP only; 8 bits per sample is its finest setting."""


@dataclass
class Tool:
    """One way to hold the survey: how to make the store (from the SEG-Y or the volume) and read it."""

    name: str
    peer: str | None  # the --peers name it needs, None for cubeslab itself
    store: str  # file or folder name in the data folder
    make: Callable[[Path, Path, np.ndarray], None] | None  # (sgy, store, volume); None: reads the SEG-Y
    open: Callable[[Path], seismic.Reader]
    how: str  # how it takes the survey in, for the table
    shares: str | None = None  # another tool whose store it reads
    own_cache: bool = False
    """It answers a repeated read from decoded data it keeps in the process (a warm figure that is not
    comparable: left out of 'fastest peer')."""


def _cubeslab(sgy, out, _):
    cubeslab.ingest(sgy, out, overwrite=True)


def _cubeslab_views(sgy, out, _):
    cubeslab.ingest(sgy, out, overwrite=True, views=["inline", "crossline", "time"])


def _mdio(sgy, out, _):
    seismic.ingest_mdio(sgy, out)


def _openvds(sgy, out, _):
    seismic.ingest_openvds(sgy, out, "None")


def _seismic_zfp(sgy, out, _):
    with contextlib.redirect_stdout(io.StringIO()):  # its progress bar would flood the console
        seismic.ingest_seismic_zfp(sgy, out, SEISMIC_ZFP_BITS)


def _h5py(sgy, out, volume):
    seismic.write_h5py(out, volume, chunks=(PEER_CHUNKS,) * 3)


def _zarr(sgy, out, volume):
    seismic.write_zarr(out, volume, (PEER_CHUNKS,) * 3)


def tools() -> list[Tool]:
    c = f"{PEER_CHUNKS}³ chunks"
    return [
        Tool("cubeslab", None, "cubeslab.zarr", _cubeslab, seismic.open_cubeslab,
             "ingest from SEG-Y (the planner's layout)"),
        Tool("cubeslab + views", None, "cubeslab-views.zarr", _cubeslab_views, seismic.open_cubeslab,
             "ingest from SEG-Y, with inline, crossline and time copies"),
        Tool("MDIO", "mdio", "mdio.mdio", _mdio, seismic.open_mdio, "segy_to_mdio (default: blosc zstd)"),
        Tool("OpenVDS", "openvds", "openvds.vds", _openvds, seismic.open_openvds,
             "SEGYImport, no compression"),
        Tool("seismic-zfp", "seismic-zfp", "seismic.sgz", _seismic_zfp, seismic.open_seismic_zfp,
             f"SegyConverter, {SEISMIC_ZFP_BITS} bits per sample (lossy)", own_cache=True),
        Tool("segyio", "segyio", "", None, seismic.open_segyio, "reads the SEG-Y as it is"),
        Tool("h5py", "h5py", "h5py.h5", _h5py, seismic.open_h5py, f"written from memory, {c}"),
        Tool("zarr-python", "zarr", "zarr-python.zarr", _zarr, seismic.open_zarr,
             f"written from memory, {c}"),
        Tool("TensorStore", "tensorstore", "zarr-python.zarr", None, seismic.open_tensorstore,
             "reads the zarr-python store", shares="zarr-python"),
    ]  # fmt: skip


def run(r: StudyRun, p: dict) -> None:
    shape = tuple(p["shape"])
    sgy = seismic.survey(r.data, shape)
    volume = SyntheticSurvey(*shape).volume()
    r.bandwidth = bounds(r.data, p["scratch"])
    keys = seismic.accesses(shape)
    r.note(
        f"Generated post-stack survey {' x '.join(map(str, shape))} float32, "
        f"{sgy.stat().st_size / 1e6:.0f} MB of SEG-Y. Ingest: the SEG-Y in the page cache, the store's files "
        "synced to disk, median of the runs; "
        "h5py and zarr-python have no SEG-Y reader, so theirs is the time to write the volume from memory. "
        "Every tool's reads were compared with the source volume: 'exact' or the SNR of a lossy store."
    )
    found: dict[str, dict] = {}
    for tool in tools():
        if tool.peer is not None and not r.peer(tool.peer):
            continue
        path = sgy if tool.make is None and tool.shares is None else r.data / (tool.store or sgy.name)
        entry: dict = {"how": tool.how, "own_cache": tool.own_cache}
        if tool.make is not None:
            entry["ingest"] = ingest_runs(tool, sgy, path, volume, r.runs)
        entry["bytes"] = size_on_disk(path)
        entry["check"] = check(tool.open(path), keys, volume)
        entry["reads"] = seismic.time_accesses(tool.open, path, keys, shape, r.runs)
        found[tool.name] = entry
        if tool.make is not None and tool.name != "zarr-python":  # TensorStore reads that one next
            remove(path)
    remove(r.data / "zarr-python.zarr")
    r.results = {"shape": shape, "segy_bytes": sgy.stat().st_size, "tools": found}
    tables(r, found, keys, shape, sgy.stat().st_size)
    plot(r, found, keys)


def ingest_runs(tool: Tool, sgy: Path, path: Path, volume: np.ndarray, runs: int) -> dict:
    make = tool.make
    if make is None:
        raise ValueError(f"{tool.name} makes no store: it reads the SEG-Y")
    seismic.read_through(sgy)  # the source in the page cache, as for every tool
    times = []
    for _ in range(runs):
        remove(path)
        times.append(seismic.timed_write(partial(make, sgy, path, volume)))
    return stats(times)


def check(read: seismic.Reader, keys: dict, volume: np.ndarray) -> str:
    """'exact' if every access returns the source's values, else the worst SNR (a lossy store);
    a reader returning something of the wrong shape is a bug in this study, raised at once."""
    worst = math.inf
    for name, key in keys.items():
        got = np.asarray(read(key), dtype=np.float64)
        want = volume[key].astype(np.float64)
        if got.size != want.size:
            raise AssertionError(f"{name}: read {got.shape}, expected {want.shape}")
        got = got.reshape(want.shape)
        error = float(((got - want) ** 2).sum())
        if error:
            worst = min(worst, 10 * math.log10(float((want**2).sum()) / error))
    return "exact" if worst == math.inf else f"SNR {worst:.1f} dB"


def tables(r: StudyRun, found: dict, keys: dict, shape, segy_bytes: int) -> None:
    rows = []
    for name, e in found.items():
        ingest = e.get("ingest")
        rows.append(
            [name, e["how"], seconds(ingest) if ingest else "—",
             f"{segy_bytes / ingest['median_s'] / 1e6:.0f}" if ingest else "—",
             mib(e["bytes"]), f"{e['bytes'] / (4 * np.prod(shape)):.2f}", e["check"]]
        )  # fmt: skip
    r.table(
        "Ingest and size on disk",
        ["tool", "how", "ingest s", "MB/s of SEG-Y", "MiB on disk", "÷ raw volume", "reads"],
        rows,
        note=f"Bound: the SEG-Y read and the store written once at the disk's sequential rate, "
        f"{2 * segy_bytes / r.bandwidth['disk_read_Bps']:.2f} s (from the page cache, a memory copy: "
        f"{segy_bytes / r.bandwidth['memory_copy_Bps']:.2f} s).",
    )
    for state, bw in (("warm", r.bandwidth["memory_copy_Bps"]), ("cold", r.bandwidth["disk_read_Bps"])):
        rows = []
        for access, key in keys.items():
            cubeslab_s = found["cubeslab"]["reads"][access][state]["median_s"]
            row = [access, ms_value(seismic.key_bytes(shape, key) / bw)]
            row += [ms(e["reads"][access][state]) for e in found.values()]
            peers = [
                e["reads"][access][state]["median_s"]
                for n, e in found.items()
                if not n.startswith("cubeslab") and not (state == "warm" and e["own_cache"])
            ]
            row.append(ratio(min(peers) / cubeslab_s) if peers else "—")
            rows.append(row)
        r.table(
            f"Reads, {state} (ms)",
            ["access", "bound", *found, "fastest peer ÷ cubeslab"],
            rows,
            note="Bound: the bytes the access returns ÷ "
            + ("memory copy bandwidth." if state == "warm" else "sequential disk bandwidth.")
            + (
                " seismic-zfp answers a repeated read from its own cache of decoded data, so its warm "
                "figures are left out of 'fastest peer'."
                if state == "warm"
                else ""
            ),
        )
    r.table(
        "Where cubeslab stands: each tool's median time ÷ cubeslab's (above 1: cubeslab is faster)",
        ["tool", *(f"{a} {s}" for s in ("warm", "cold") for a in keys)],
        [[name, *(ratio(e["reads"][a][s]["median_s"] / found["cubeslab"]["reads"][a][s]["median_s"])
                  for s in ("warm", "cold") for a in keys)]
         for name, e in found.items() if name != "cubeslab"],
    )  # fmt: skip


def seconds(timing: dict) -> str:
    return f"{timing['median_s']:.3g} ({timing['min_s']:.3g}–{timing['max_s']:.3g})"


def plot(r: StudyRun, found: dict, keys: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), sharey=True)
    width = 0.8 / len(found)
    for ax, state in zip(axes, ("warm", "cold"), strict=True):
        for i, (name, e) in enumerate(found.items()):
            medians = np.array([e["reads"][a][state]["median_s"] for a in keys]) * 1e3
            lo = medians - np.array([e["reads"][a][state]["min_s"] for a in keys]) * 1e3
            hi = np.array([e["reads"][a][state]["max_s"] for a in keys]) * 1e3 - medians
            xs = np.arange(len(keys)) + i * width
            ax.bar(xs, medians, width, yerr=[lo, hi], label=name, capsize=2)
        ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2, list(keys), fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{state} reads")
        ax.set_ylabel("ms (median, min–max)")
        ax.tick_params(labelleft=True)  # shared scale, labelled on both sides
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(found), fontsize=8, bbox_to_anchor=(0.5, -0.06))
    fig.suptitle("The same survey read by each tool")
    r.plot(fig, "reads", "Median read times per access and tool (log scale), warm (left) and cold (right); "
           "whiskers: min–max of the runs.")  # fmt: skip
