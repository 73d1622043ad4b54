"""The OpenMSI study's plots: selection times against the study's limits, variance over a
subcube, and compression ratio against write speed."""

from __future__ import annotations

import numpy as np

from .msi import CASE_LABELS, CASES, CRITERIA_S, TOOL_LABELS
from .study import StudyRun


def plot_selections(r: StudyRun, found: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(found)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8), sharey=False)
    xs = np.arange(len(names))
    for ax, case in zip(axes, CASES, strict=True):
        for offset, state, colour, label in (
            (-0.2, "sustained", "#3b6ea8", "sustained (median)"),
            (0.2, "first", "#d08a2c", "first access (median, bar to max)"),
        ):
            t = [found[n]["cases"][case][state] for n in names]
            med = np.array([x["median_s"] for x in t]) * 1e3
            err = np.array([[m - x["min_s"] * 1e3 for m, x in zip(med, t, strict=True)],
                            [x["max_s"] * 1e3 - m for m, x in zip(med, t, strict=True)]])  # fmt: skip
            ax.bar(xs + offset, med, 0.4, yerr=err, color=colour, label=label, capsize=2)
        ax.axhline(CRITERIA_S[case] * 1e3, color="#a33", ls="--", lw=1, label="study's limit (median)")
        ax.set_yscale("log")
        ax.set_title(CASE_LABELS[case], fontsize=10)
        ax.set_xticks(xs, names, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("ms")
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].legend(fontsize=7.5)
    fig.suptitle(f"Selections on a {' x '.join(map(str, r.results['shape']))} uint16 MSI cube", fontsize=11)
    fig.tight_layout()
    r.plot(fig, "selections", "Selection times per layout and case (log scale): sustained median and "
           "first-access median with min–max bars; dashed: the study's limit for the median.")  # fmt: skip


def plot_variance(r: StudyRun, found: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    ks = found["workers"]
    for name, by_k in found["by_layout"].items():
        t = [by_k[str(k)] for k in ks]
        med = np.array([x["median_s"] for x in t]) * 1e3
        err = np.array([[m - x["min_s"] * 1e3 for m, x in zip(med, t, strict=True)],
                        [x["max_s"] * 1e3 - m for m, x in zip(med, t, strict=True)]])  # fmt: skip
        left.errorbar(ks, med, yerr=err, marker="o", capsize=3, label=name)
        right.plot(ks, med[0] / med, marker="o", label=name)
    right.plot(ks, ks, color="grey", ls=":", label="linear")
    left.set(xlabel="Dask worker processes", ylabel="ms (median, min–max)", title="Variance of 20 % of m/z")
    right.set(xlabel="Dask worker processes", ylabel="speed-up vs 1 worker", title="Speed-up")
    for ax in (left, right):
        ax.set_xticks(ks)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    r.plot(fig, "variance-scaling", "Variance over 20 % of the m/z slices with 1..N Dask worker processes.")


def plot_compression(r: StudyRun, found: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for tool, marker in (("h5py", "s"), ("cubeslab", "o")):
        points = [e for e in found if e["tool"] == tool]
        if not points:
            continue
        ax.scatter([e["write_MBps"] for e in points], [e["ratio"] for e in points], marker=marker,
                   label=TOOL_LABELS[tool])  # fmt: skip
        # HDF5 labels below-left, cubeslab's above-right: the two gzip series lie close together
        offset, align = ((-4, -10), "right") if tool == "h5py" else ((4, 3), "left")
        for e in points:
            ax.annotate(e["compress"], (e["write_MBps"], e["ratio"]), fontsize=7, xytext=offset,
                        textcoords="offset points", ha=align)  # fmt: skip
    ax.set_xscale("log")
    ax.margins(x=0.12)
    ax.set(xlabel="write MB/s (median)", ylabel="compression ratio (raw ÷ file)",
           title="Compression ratio against write speed")  # fmt: skip
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    r.plot(fig, "compression", "Compression ratio against write speed, 4 x 4 x 2048 chunks, per codec.")


# -- the study -------------------------------------------------------------------------------------
