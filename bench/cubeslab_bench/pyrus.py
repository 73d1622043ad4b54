"""Study ``pyrus`` ([Pyrus-IO] and [Pyrus-chunks]): SEG-Y against chunked stores on this machine.

1. Read time per float of inline, crossline and time slice (and their average, the study's measure)
   against cube chunk size, for cubeslab, HDF5 (h5py), zarr-python and TensorStore, with segyio on
   the SEG-Y as the unchunked line ([Pyrus-IO], Figure 4).
2. The chunk-shape sweep of [Pyrus-chunks] (target size, ratio, asymmetry, one knob at a time around
   the published 2048 KiB, 2.0, 2.5), each layout written by cubeslab and its planes timed.
3. The published formula's pick (in cubeslab and in HDF5, the study's own format) beside cubeslab's
   planner pick.
4. The "plane read time" table of [Pyrus-chunks] made again: SEG-Y against chunked, and the speed-up.
"""

from __future__ import annotations

import shutil

import numpy as np

import cubeslab
from cubeslab.plan import plan as plan_layout
from cubeslab.synthetic import SyntheticSurvey

from . import seismic
from .measure import bounds
from .study import StudyRun, ms, ms_value, number

TITLE = "Pyrus: SEG-Y against chunked stores, chunk size and chunk shape"
REFERENCES = "the Pyrus studies of parallel IO and of the chunk shape (Pyrus seismic software blog)"

BASE = (2048, 2.0, 2.5)
"""The Pyrus chunk-shape study's published choice: target chunk KiB, ratio, asymmetry."""

SIZES = {
    "tiny": {"shape": (48, 40, 64), "cubes": (16, 32), "kib": (64, 1024), "ratio": (1.0,), "asym": (1.0,),
             "base": (256, 2.0, 2.5), "scratch": 32 << 20},
    "small": {"shape": (256, 256, 256), "cubes": (16, 32, 64, 128), "kib": (256, 512, 1024, 4096),
              "ratio": (1.0, 1.5, 3.0), "asym": (1.0, 1.5, 4.0), "base": BASE, "scratch": 256 << 20},
    "medium": {"shape": (512, 512, 512), "cubes": (16, 32, 64, 128), "kib": (256, 512, 1024, 4096, 8192),
               "ratio": (1.0, 1.5, 3.0, 4.0), "asym": (1.0, 1.5, 4.0), "base": BASE, "scratch": 512 << 20},
    "large": {"shape": (1024, 1024, 1024), "cubes": (16, 32, 64, 128), "kib": (256, 512, 1024, 4096, 8192),
              "ratio": (1.0, 1.5, 3.0, 4.0), "asym": (1.0, 1.5, 4.0), "base": BASE, "scratch": 1 << 30},
}  # fmt: skip

PUBLISHED = "Pyrus chunk-shape study: 1966 x 1103 x 3001 float32 on an NVMe SSD"
PLANE_NAMES = ("inline", "crossline", "time slice")


def run(r: StudyRun, p: dict) -> None:
    shape = tuple(p["shape"])
    sgy = seismic.survey(r.data, shape)
    volume = SyntheticSurvey(*shape).volume()
    r.bandwidth = bounds(r.data, p["scratch"])
    r.note(
        f"Generated post-stack survey {' x '.join(map(str, shape))} float32 (dipping reflectors, a fault, "
        f"noise), {sgy.stat().st_size / 1e6:.0f} MB of SEG-Y. Planes through the middle of the volume. "
        "cubeslab reads with checksums verified (its default). The published experiments ran on a "
        "1966 x 1103 x 3001 volume from Java; here every tool runs from Python on this machine."
    )
    segy = measure_tool(r, seismic.open_segyio, sgy, shape) if r.peer("segyio") else None
    chunk_size_sweep(r, p, sgy, volume, segy)
    shape_sweep(r, p, sgy, shape)
    picks = formula_against_planner(r, sgy, volume)
    plane_table(r, shape, segy, picks.get("cubeslab auto (planner)"))


# -- measuring ----------------------------------------------------------------------------------------


def measure_tool(r: StudyRun, opener, path, shape) -> dict:
    """Warm and cold timings of the three planes: plane → {"warm", "cold", "floats"}."""
    return seismic.time_accesses(opener, path, seismic.planes(shape), shape, r.runs)


def per_float(timing: dict, floats: int) -> dict:
    """A plane timing as ns per float (median, min, max)."""
    return {k: timing[k] / floats * 1e9 for k in ("median_s", "min_s", "max_s")}


def average_per_float(planes: dict, state: str) -> float:
    """The study's measure: the mean of the three planes' ns per float."""
    return float(np.mean([per_float(planes[n][state], planes[n]["floats"])["median_s"] for n in PLANE_NAMES]))


def ns(timing: dict) -> str:
    f = number()
    return f"{f(timing['median_s'])} ({f(timing['min_s'])}–{f(timing['max_s'])})"


def slowest(planes: dict, state: str) -> float:
    return max(planes[n][state]["median_s"] for n in PLANE_NAMES)


# -- 1. read time per float against chunk size ---------------------------------------------------------


def chunk_size_sweep(r: StudyRun, p: dict, sgy, volume: np.ndarray, segy: dict | None) -> None:
    shape = volume.shape
    tools = ["cubeslab"] + [t for t in ("h5py", "zarr", "tensorstore") if r.peer(t)]
    found: dict[str, dict[int, dict]] = {t: {} for t in tools}
    for n in p["cubes"]:
        store = r.data / f"pyrus-cube{n}.zarr"
        cubeslab.ingest(sgy, store, layout=f"cube:{n}", overwrite=True)
        found["cubeslab"][n] = measure_tool(r, seismic.open_cubeslab, store, shape)
        shutil.rmtree(store)
        if "h5py" in tools:
            path = r.data / f"pyrus-cube{n}.h5"
            seismic.write_h5py(path, volume, chunks=(n, n, n))
            found["h5py"][n] = measure_tool(r, seismic.open_h5py, path, shape)
            path.unlink()
        if "zarr" in tools or "tensorstore" in tools:
            path = r.data / f"pyrus-cube{n}-zarr-python.zarr"
            seismic.write_zarr(path, volume, (n, n, n))
            for tool, opener in (("zarr", seismic.open_zarr), ("tensorstore", seismic.open_tensorstore)):
                if tool in tools:
                    found[tool][n] = measure_tool(r, opener, path, shape)
            shutil.rmtree(path)
    r.results["chunk_size"] = {"cubes": list(p["cubes"]), "tools": found, "segyio": segy}
    bw = r.bandwidth
    for state, bandwidth in (("cold", bw["disk_read_Bps"]), ("warm", bw["memory_copy_Bps"])):
        rows = []
        for tool in tools:
            for n, planes in found[tool].items():
                cells = [ns(per_float(planes[x][state], planes[x]["floats"])) for x in PLANE_NAMES]
                rows.append([tool, f"{n}³", *cells, number()(average_per_float(planes, state))])
        if segy:
            cells = [ns(per_float(segy[x][state], segy[x]["floats"])) for x in PLANE_NAMES]
            rows.append(["segyio (SEG-Y, unchunked)", "—", *cells, number()(average_per_float(segy, state))])
        r.table(
            f"Read time per float against cube chunk size, {state} (ns per float)",
            ["tool", "chunks", *PLANE_NAMES, "average"],
            rows,
            note=f"Bound: 4 bytes ÷ {'disk' if state == 'cold' else 'memory copy'} bandwidth = "
            f"{4 / bandwidth * 1e9:.3g} ns per float. Average: the mean of the three planes' times per "
            "float, the study's measure.",
        )
    plot_chunk_size(r, found, segy, p["cubes"])


def plot_chunk_size(r: StudyRun, found: dict, segy: dict | None, cubes) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(15, 6.5), sharex=True)
    for row, state in enumerate(("cold", "warm")):
        bound = 4 / r.bandwidth["disk_read_Bps" if state == "cold" else "memory_copy_Bps"] * 1e9
        for col, name in enumerate((*PLANE_NAMES, "average")):
            ax = axes[row][col]
            for tool, by_n in found.items():
                ys = [
                    average_per_float(by_n[n], state)
                    if name == "average"
                    else per_float(by_n[n][name][state], by_n[n][name]["floats"])["median_s"]
                    for n in cubes
                ]
                ax.plot(cubes, ys, marker="o", label=tool)
            if segy:
                y = (
                    average_per_float(segy, state)
                    if name == "average"
                    else per_float(segy[name][state], segy[name]["floats"])["median_s"]
                )
                ax.axhline(y, color="k", linestyle="--", label="segyio (SEG-Y)")
            ax.axhline(bound, color="grey", linestyle=":", label="physical bound")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(list(cubes), [f"{n}³" for n in cubes])
            ax.set_title(f"{name}, {state}")
            if col == 0:
                ax.set_ylabel("ns per float")
            if row == 1:
                ax.set_xlabel("cube chunk side")
    axes[0][3].legend(fontsize=7)
    fig.suptitle("Read time per float against chunk size (Pyrus parallel IO, Figure 4, on this machine)")
    r.plot(fig, "chunk-size", "Read time per float against cube chunk size, cold (top) and warm (bottom); "
           "dashed: segyio on the SEG-Y; dotted: the physical bound.")  # fmt: skip


# -- 2. the Pyrus chunk-shape sweep ----------------------------------------------------------------------


def sweep_points(p: dict) -> list[tuple[str, tuple[float, float, float]]]:
    """(knob varied, (KiB, ratio, asymmetry)), one knob at a time around the base point."""
    kib, ratio, asym = p["base"]
    points = [("base", (kib, ratio, asym))]
    points += [("size", (k, ratio, asym)) for k in p["kib"]]
    points += [("ratio", (kib, x, asym)) for x in p["ratio"]]
    points += [("asymmetry", (kib, ratio, a)) for a in p["asym"]]
    return points


def shape_sweep(r: StudyRun, p: dict, sgy, shape) -> None:
    rows, found = [], []
    for knob, (kib, ratio, asym) in sweep_points(p):
        store = r.data / "pyrus-sweep.zarr"
        cubeslab.ingest(sgy, store, layout=f"pyrus-formula:{kib:g},{ratio:g},{asym:g}", overwrite=True)
        chunks = cubeslab.open(store).amplitude.chunks
        planes = measure_tool(r, seismic.open_cubeslab, store, shape)
        shutil.rmtree(store)
        found.append(
            {"knob": knob, "kib": kib, "ratio": ratio, "asymmetry": asym, "chunks": chunks, "planes": planes}
        )
        rows.append(
            [knob, f"{kib:g}", f"{ratio:g}", f"{asym:g}", "x".join(map(str, chunks)),
             *(ms(planes[n]["cold"]) for n in PLANE_NAMES), ms_value(slowest(planes, "cold")),
             *(ms_value(planes[n]["warm"]["median_s"]) for n in PLANE_NAMES)]
        )  # fmt: skip
    r.results["shape_sweep"] = found
    bw = r.bandwidth
    plane_bytes = {n: seismic.key_bytes(shape, k) for n, k in seismic.planes(shape).items()}
    r.table(
        "Chunk-shape sweep with the Pyrus formula (cubeslab, ms)",
        ["varied", "target KiB", "ratio", "asymmetry", "chunks", *(f"{n} cold" for n in PLANE_NAMES),
         "slowest cold", *(f"{n} warm" for n in PLANE_NAMES)],
        rows,
        note="One knob varied at a time around the published 2048 KiB, 2.0, 2.5 (shapes clipped to the "
        "volume). "
        "Bounds, cold / warm: " + ", ".join(
            f"{n} {ms_value(b / bw['disk_read_Bps'])} / {ms_value(b / bw['memory_copy_Bps'])} ms"
            for n, b in plane_bytes.items()),
    )  # fmt: skip
    plot_shape_sweep(r, found)


def plot_shape_sweep(r: StudyRun, found: list[dict]) -> None:
    import matplotlib.pyplot as plt

    base = next(f for f in found if f["knob"] == "base")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, knob, field in zip(
        axes, ("size", "ratio", "asymmetry"), ("kib", "ratio", "asymmetry"), strict=True
    ):
        points = sorted([f for f in found if f["knob"] == knob] + [base], key=lambda f: f[field])
        xs = [f[field] for f in points]
        for name in PLANE_NAMES:
            ax.plot(xs, [f["planes"][name]["cold"]["median_s"] * 1e3 for f in points], marker="o", label=name)
        average = [np.mean([f["planes"][n]["cold"]["median_s"] for n in PLANE_NAMES]) * 1e3 for f in points]
        ax.plot(xs, average, marker="s", color="k", label="average")
        ax.set_xlabel(
            {"size": "target chunk KiB", "ratio": "chunk ratio", "asymmetry": "chunk asymmetry"}[knob]
        )
        if knob == "size":
            ax.set_xscale("log", base=2)
        ax.set_ylabel("cold read time, ms")
        ax.set_title(f"varying {knob}")
    axes[0].legend(fontsize=8)
    fig.suptitle("The Pyrus chunk-shape sweep (its Figure 2) on this machine: cubeslab, cold")
    r.plot(fig, "shape-sweep", "Cold plane read times as the formula's target size, ratio and asymmetry vary "
           "(each around the published 2048 KiB, 2.0, 2.5).")  # fmt: skip


# -- 3. the published formula against the planner ---------------------------------------------------------


def formula_against_planner(r: StudyRun, sgy, volume: np.ndarray) -> dict:
    shape = volume.shape
    formula = tuple(plan_layout(shape, layout="pyrus-formula")[0]["layout"]["inner"])
    picks: dict[str, tuple[tuple, dict]] = {}
    for name, layout in (("cubeslab pyrus-formula (published formula)", "pyrus-formula"),
                         ("cubeslab auto (planner)", "auto")):  # fmt: skip
        store = r.data / "pyrus-pick.zarr"
        cubeslab.ingest(sgy, store, layout=layout, overwrite=True)
        chunks = cubeslab.open(store).amplitude.chunks
        picks[name] = (chunks, measure_tool(r, seismic.open_cubeslab, store, shape))
        shutil.rmtree(store)
    if r.peer("h5py"):
        path = r.data / "pyrus-formula.h5"
        seismic.write_h5py(path, volume, chunks=formula)
        picks["h5py with the published formula's chunks"] = (
            formula,
            measure_tool(r, seismic.open_h5py, path, shape),
        )
        path.unlink()
    rows = []
    auto = picks["cubeslab auto (planner)"][1]
    for name, (chunks, planes) in picks.items():
        against = [slowest(planes, s) / slowest(auto, s) for s in ("cold", "warm")]
        rows.append(
            [name, "x".join(map(str, chunks)), *(ms(planes[n]["cold"]) for n in PLANE_NAMES),
             ms_value(slowest(planes, "cold")), ms_value(slowest(planes, "warm")),
             f"{against[0]:.2f}x / {against[1]:.2f}x"]
        )  # fmt: skip
    r.results["picks"] = {name: {"chunks": c, "planes": pl} for name, (c, pl) in picks.items()}
    r.table(
        "The published formula's pick against cubeslab's planner (ms)",
        ["layout", "chunks", *(f"{n} cold" for n in PLANE_NAMES), "slowest cold", "slowest warm",
         "slowest ÷ planner's (cold / warm)"],
        rows,
        note="The planner minimises the slowest of the three planes for this machine's profile "
        "(`cubeslab profile`), or for a built-in typical machine when none was measured.",
    )  # fmt: skip
    return {name: planes for name, (_, planes) in picks.items()}


# -- 4. the Pyrus plane read time table, made again ------------------------------------------------------


def plane_table(r: StudyRun, shape, segy: dict | None, chunked: dict | None) -> None:
    r.table(
        "Plane read time: SEG-Y against chunked, as published",
        ["plane", "SEG-Y on NVMe SSD (s)", "HDF5 on NVMe SSD (s)", "speed-up factor"],
        [["inline", 0.06, 0.43, "0.15x"], ["crossline", 0.45, 0.43, "1.05x"], ["slice", 134.97, 0.42, "321x"],
         ["average", 45.16, 0.43, "105x"]],
        published=PUBLISHED,
    )  # fmt: skip
    if segy is None or chunked is None:
        return
    rows = []
    for state in ("cold", "warm"):
        for n in PLANE_NAMES:
            s, c = segy[n][state]["median_s"], chunked[n][state]["median_s"]
            rows.append([f"{n}, {state}", ms(segy[n][state]), ms(chunked[n][state]), f"{s / c:.3g}x"])
        s = np.mean([segy[n][state]["median_s"] for n in PLANE_NAMES])
        c = np.mean([chunked[n][state]["median_s"] for n in PLANE_NAMES])
        rows.append([f"average, {state}", ms_value(s), ms_value(c), f"{s / c:.3g}x"])
    r.table(
        "Plane read time on this machine: SEG-Y (segyio) against chunked (cubeslab auto), ms",
        ["plane", "SEG-Y (segyio)", "chunked (cubeslab)", "speed-up factor"],
        rows,
        note=f"Volume {' x '.join(map(str, shape))}; the published volume is about "
        f"{1966 * 1103 * 3001 / np.prod(shape):.0f} times larger, so its SEG-Y slice took minutes.",
    )
