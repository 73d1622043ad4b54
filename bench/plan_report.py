"""The planner benchmark's report (bench/plan.py): the Markdown tables and the scatter plot of
predicted against measured reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np

WARM_ONLY = "auto, warm reads only"
"""The label of the planner's pick for warm reads alone, in the results and the report."""

LONE_READ_PIECES = 8
"""Reads at once when the shards a lone plane touches are read by pieces."""


def markdown(results: dict) -> str:
    p = results["profile"]
    lines = [
        "# Planner validation",
        "",
        f"Profile of {p['path']} ({p['threads']} threads), measured again before each volume (each "
        "volume's in the JSON); predictions by the cost model for each written store. Times in ms, "
        "medians: measured / predicted. Warm: page cache and handle warm; cold: files evicted with "
        "posix_fadvise(DONTNEED), handle reopened.",
    ]
    for name, v in results["volumes"].items():
        accesses = list(v["rows"][0]["accesses"])
        lines += [
            "",
            f"## {name}: {' x '.join(map(str, v['shape']))} {v['dtype']}, accesses {v['access']}",
            "",
            "Median absolute prediction error: "
            + ", ".join(f"{k} {e['median']:.0%}" for k, e in v["errors"].items())
            + "."
            + drift_line(v),
            "",
            f"Objective: the slowest access cold + {v['weights']['warm']:.1f} x the slowest warm (the "
            "profile's memory rate over its disk's, as the planner weighs them). "
            f"Optimizer's pick {v['pick']}: {v['pick_score_s'] * 1e3:.1f} ms; "
            f"best of the sweep {v['best']}: {v['best_score_s'] * 1e3:.1f} ms; "
            f"pick / best = {v['pick_over_best']:.2f}." + head_to_head_line(v.get("head_to_head")),
            "",
            "| layout | chosen as | padding | "
            + " | ".join(f"{a} warm | {a} cold" for a in accesses)
            + " | objective |",
            "|---|---|---:|" + "---:|" * (2 * len(accesses)) + "---:|",
        ]
        for r in sorted(v["rows"], key=lambda r: r["measured_score_s"]):
            cells = []
            for a in accesses:
                m = r["accesses"][a]
                cells.append(f"{m['warm']['median_s'] * 1e3:.2f} / {m['predicted_warm_s'] * 1e3:.2f}")
                cells.append(f"{m['cold']['median_s'] * 1e3:.1f} / {m['predicted_cold_s'] * 1e3:.1f}")
            lines.append(
                f"| {r['layout']} | {r['why']} | {r['padding']:.1%} | "
                + " | ".join(cells)
                + f" | {r['measured_score_s'] * 1e3:.1f} |"
            )
    b = results.get("benchmark_volume")
    if b:
        lines += [
            "",
            f"## Benchmark volume {' x '.join(map(str, b['shape']))} float32",
            "",
            "Disk sequential read (median of 5 cold reads of 256 MiB at spread offsets): "
            f"{b['disk_read_Bps'] / 1e9:.2f} GB/s.",
            "",
            "| strategy | layout | inline warm / cold | crossline warm / cold | time warm / cold "
            "| slowest warm / cold | its bound warm / cold |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for s, e in b["strategies"].items():
            cells = [
                f"{p['warm']['median_s'] * 1e3:.2f} / {p['cold']['median_s'] * 1e3:.1f}"
                for p in e["planes"].values()
            ]
            slow = f"{b['slowest_warm_s'][s] * 1e3:.2f} / {b['slowest_cold_s'][s] * 1e3:.1f}"
            bound = slowest_plane_bound(e)
            bound_cell = f"{bound['warm_bound_s'] * 1e3:.2f} / {bound['cold_bound_s'] * 1e3:.1f}"
            lines.append(f"| {s} | {e['layout']} | " + " | ".join(cells) + f" | {slow} | {bound_cell} |")
        lines += [
            "",
            "The bound of a strategy's slowest plane (warm and cold each): warm, the bytes of the chunks "
            "it touches (each read whole to check its crc32c) at the profile's crc32c rate on all threads; "
            "cold, the bytes it requests at the disk's sequential rate.",
        ]
        lines += [
            "",
            "auto's slowest plane is faster by: "
            + ", ".join(
                f"{s} {b['auto_speedup_warm'][s]:.1f}x warm, {b['auto_speedup_cold'][s]:.1f}x cold"
                for s in b["auto_speedup_warm"]
                if s != WARM_ONLY
            )
            + ".",
        ]
        if WARM_ONLY in b["strategies"]:
            ratio = b["slowest_warm_s"]["cube:64"] / b["slowest_warm_s"][WARM_ONLY]
            bounds = {s: slowest_plane_bound(e)["warm_bound_s"] for s, e in b["strategies"].items()}
            lines += [
                "",
                f"The planner's pick for warm reads alone ({b['strategies'][WARM_ONLY]['layout']}) is "
                f"{ratio:.1f}x faster warm than cube:64: every chunk a plane touches is read whole to "
                "check its crc32c, so warm reads move (and check) the bytes of whole chunks at memory "
                "speed, and chunks small enough to cut those bytes further cost more per byte. Even at "
                "their warm bounds, auto's slowest plane would be "
                f"{bounds['cube:64'] / bounds['auto']:.1f}x faster than cube:64's, and the warm-only "
                f"pick's {bounds['cube:64'] / bounds[WARM_ONLY]:.1f}x.",
            ]
        views = b["strategies"]["auto"].get("views")
        if views:
            auto = b["strategies"]["auto"]
            extra = sum(auto["view_bytes"].values()) / auto["stored_bytes"]
            sequential = views["sequential_Bps"]
            lines += [
                "",
                f"With `--views inline,crossline,time` (+{extra:.0%} on disk), each plane read cold "
                f"({len(views['sequential_rates_Bps'])} rounds). The yardstick: a 256 MiB file written just "
                "after the views, read sequentially (16 MiB requests) in each round after the planes: "
                f"{sequential / 1e9:.2f} GB/s (median); the SEG-Y file above, written long before: "
                f"{b['disk_read_Bps'] / 1e9:.2f} GB/s. Beside each plane, the shard files it touches read "
                "whole, cold, by plain read() calls and by "
                f"{LONE_READ_PIECES} reads at once (each a piece of the file, on its own thread), in the "
                "same rounds (each first in turn): what the disk gives a lone read of those files. Each "
                "round reads planes at new positions (a virtual disk's host may still cache what was read "
                "a round before).",
                "",
                "| plane | read from | warm ms | cold ms | MB/s | share of sequential (file beside) "
                "| share of sequential (SEG-Y) "
                "| its shard files by read(): files, MB, ms, share of sequential "
                f"| by {LONE_READ_PIECES} reads at once: ms, share |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|",
            ]
            for plane, v in views["planes"].items():
                rate = v["bytes"] / v["cold"]["median_s"]
                lines.append(
                    f"| {plane} | {v['source']} | {v['warm']['median_s'] * 1e3:.2f} | "
                    f"{v['cold']['median_s'] * 1e3:.2f} | {rate / 1e6:,.0f} | "
                    f"{rate / sequential:.0%} | {rate / b['disk_read_Bps']:.0%} | {v['shard_files']}, "
                    f"{v['shard_bytes'] / 1e6:.1f}, {v['plain_read']['median_s'] * 1e3:.2f}, "
                    f"{v['plain_fraction_of_sequential']:.0%} | {v['parallel_read']['median_s'] * 1e3:.2f}, "
                    f"{v['parallel_fraction_of_sequential']:.0%} |"
                )
            warm_slowest = max(v["warm"]["median_s"] for v in views["planes"].values())
            lines += [
                "",
                f"With the views, the slowest plane warm takes {warm_slowest * 1e3:.2f} ms: "
                f"{b['slowest_warm_s']['cube:64'] / warm_slowest:.1f}x faster than with 64³ chunks.",
            ]
    return "\n".join(lines) + "\n"


def slowest_plane_bound(entry: dict) -> dict:
    """The warm and cold bound of the strategy's slowest plane, in each cache state."""
    planes, bounds = entry["planes"], entry["bounds"]

    def slowest(state: str) -> str:
        return max(planes, key=lambda p: planes[p][state]["median_s"])

    return {f"{state}_bound_s": bounds[slowest(state)][f"{state}_bound_s"] for state in ("warm", "cold")}


def drift_line(v: dict) -> str:
    """The device profile measured again after the sweep: what moved, and the errors against it."""
    if not v.get("drift"):
        return ""
    moved = "; ".join(f"{k} {b:.3g} -> {a:.3g}" for k, (b, a) in v["drift"].items())
    errors = ", ".join(f"{k} {e['median']:.0%}" for k, e in v["errors_after"].items())
    return (
        f" The profile measured again straight after the sweep: {moved}. The errors had the model been"
        f" given that profile: {errors}."
    )


def head_to_head_line(final: dict | None) -> str:
    if not final:
        return ""
    rounds = next(iter(final["pick"]["accesses"].values()))["cold"]["runs"]
    return (
        f" Measured again side by side ({rounds} rounds, each reading both layouts): pick "
        f"{final['pick']['score_s'] * 1e3:.1f} ms, best {final['best']['score_s'] * 1e3:.1f} ms; "
        f"pick / best = {final['pick_over_best']:.2f}."
    )


def scatter(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5), dpi=100)
    for ax, state in zip(axes, ("warm", "cold"), strict=True):
        lo, hi = np.inf, 0.0
        for name, v in results["volumes"].items():
            for a in v["rows"][0]["accesses"]:
                pred = [r["accesses"][a][f"predicted_{state}_s"] * 1e3 for r in v["rows"]]
                meas = [r["accesses"][a][state]["median_s"] * 1e3 for r in v["rows"]]
                ax.scatter(meas, pred, s=14, label=f"{name} {a}", alpha=0.8)
                lo, hi = min(lo, *pred, *meas), max(hi, *pred, *meas)
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
        ax.plot([lo, hi], [lo * 1.25, hi * 1.25], color="k", lw=0.5, ls="--")
        ax.plot([lo, hi], [lo / 1.25, hi / 1.25], color="k", lw=0.5, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured (ms, median)")
        ax.set_ylabel("predicted (ms)")
        ax.set_title(f"{state} reads: predicted vs measured (dashed: ±25 %)")
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
