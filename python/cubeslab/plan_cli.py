"""The ``cubeslab profile`` and ``cubeslab plan`` commands (registered by :mod:`cubeslab.cli`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import defaults
from .defaults import HELP
from .locations import local_only
from .plan import check_access, check_dtype, check_layout

console = Console()
errors = Console(stderr=True)


def checked(check: Callable[[str], None]) -> Callable[[str | None], str | None]:
    """A typer option callback running ``check``: its ValueError becomes a usage error that names
    the option (exit code 2), before any work starts."""

    def callback(value: str | None) -> str | None:
        if value is not None:
            try:
                check(value)
            except ValueError as error:
                raise typer.BadParameter(str(error)) from None
        return value

    return callback


def at_least(low: int) -> Callable[[int], int]:
    """A typer option callback refusing an integer below ``low`` as a usage error naming it."""

    def callback(value: int) -> int:
        if value < low:
            raise typer.BadParameter(f"{value}: give {low} or more")
        return value

    return callback


def parse_shape(text: str) -> list[int]:
    """'600,800,1000' (or 600x800x1000) -> [600, 800, 1000]; ValueError naming ``text`` unless each side
    is a whole number of at least 1 (not 1e3: an exponent is a float's)."""
    sides = text.replace("x", ",").split(",")
    if not all(re.fullmatch(r"\s*[0-9]{1,18}\s*", side) and int(side) > 0 for side in sides):
        raise ValueError(f"{text!r}: give each side as a whole number of at least 1, e.g. 600,800,1000")
    return [int(side) for side in sides]


PLAN_STATES = ("both", "warm", "cold")
"""The read states a plan's objective can count."""


def check_state(state: str) -> None:
    """Raise ValueError naming ``state`` unless it is one of :data:`PLAN_STATES`."""
    if state not in PLAN_STATES:
        raise ValueError(f"{state!r}: give {', '.join(PLAN_STATES[:-1])} or {PLAN_STATES[-1]}")


def check_plan_dtype(dtype: str) -> None:
    """Raise ValueError naming ``dtype`` unless it is an element type ("native" is a source's, and
    plan reads none)."""
    if dtype == "native":
        raise ValueError(
            "'native' is the source's own type, which plan does not read: give one, e.g. float32"
        )
    check_dtype(dtype)


LayoutOption = Annotated[
    str,
    typer.Option(
        callback=checked(check_layout),
        help=HELP["layout"],
    ),
]
"""``--layout``, as ingest and plan take it."""

AccessOption = Annotated[
    str | None,
    typer.Option(
        callback=checked(check_access),
        help=HELP["access"],
    ),
]
"""``--access``, as ingest and plan take it."""


def _size(n: float) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n:.0f} B"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}"


def profile_command(
    path: Annotated[Path, typer.Argument(help="A directory on the filesystem to profile")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Profile file (default: per user, per filesystem)")
    ] = None,
    quick: Annotated[bool, typer.Option(help="About 10 s instead of 30 (rougher numbers)")] = False,
    threads: Annotated[int | None, typer.Option(help="Worker threads (default: all cores)")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG of throughput against queue depth")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the profile as JSON")] = False,
) -> None:
    """Measure reads against request size and queue depth (cold and warm), memory and codec speeds."""
    from .plan import measure_profile

    with console.status("measuring (a scratch file is written, read and removed) ..."):
        profile = measure_profile(path, output=output, quick=quick, threads=threads)
    # With --json, standard output is the JSON alone (it names the file it was saved to).
    notes = errors if as_json else console
    if as_json:
        console.print_json(json.dumps(profile))
    else:
        print_profile(profile)
    if plot is not None:
        plot_profile(profile, plot)
        notes.print(f"wrote {escape(str(plot))}")
    if not as_json:
        console.print(f"saved to {escape(profile['saved_to'])}")


def print_profile(profile: dict) -> None:
    io = profile["io"]
    for state in ("cold", "warm"):
        table = Table(title=f"{state} reads, MB/s (rows: request size; columns: requests in flight)")
        table.add_column("size", justify="right")
        for depth in io["depths"]:
            table.add_column(str(depth), justify="right")
        rows = io.get("cold_measured") or io["cold"] if state == "cold" else io["warm"]
        for size, row in zip(io["sizes"], rows, strict=True):
            table.add_row(_size(size), *(f"{v / 1e6:,.0f}" for v in row))
        console.print(table)
    memory, engine = profile["memory"], profile["engine"]
    table = Table(title=f"per thread, {profile['threads']} threads busy", show_header=False)
    table.add_row("memory copy", f"{memory['copy'] / 1e9:.1f} GB/s")
    if memory.get("copy_from_cache") is not None:
        cached = memory["copy_from_cache"]
        table.add_row("copy out of a chunk in the CPU's caches", f"{cached / 1e9:.1f} GB/s")
    table.add_row("crc32c, from memory", f"{memory['crc'] / 1e9:.1f} GB/s")
    if memory.get("crc_chunk_start"):
        start = memory["crc_chunk_start"]
        table.add_row("crc32c, start of a chunk away from the last", f"{start * 1e6:.2f} µs (8 KiB)")
    for point in memory.get("crc_chunk_start_by_size", []):
        table.add_row(f"  start of a {_size(point['bytes'])} chunk", f"{point['seconds'] * 1e6:.2f} µs")
    for point in memory.get("crc_within", []):
        table.add_row(
            f"  {_size(point['bytes'])} checked again and again",
            f"{point['crc'] / 1e9:.1f} GB/s, a chunk start {point['chunk_start'] * 1e6:.2f} µs",
        )
    table.add_row("first touch of mapped pages", f"{memory['fault'] / 1e9:.1f} GB/s")
    table.add_row("read call", f"{engine['call'] * 1e6:.1f} µs")
    table.add_row("a worker's arrival to help a read", f"{engine['helper_arrival'] * 1e6:.1f} µs")
    table.add_row("per chunk", f"{engine['task'] * 1e9:.0f} ns")
    table.add_row("per run of the copy", f"{engine['run'] * 1e9:.2f} ns")
    table.add_row("per strided element, a cache line apart", f"{engine['strided_element'] * 1e9:.2f} ns")
    if engine.get("strided_element_dense") is not None:
        table.add_row("per strided element, 8 bytes apart", f"{engine['strided_element_dense'] * 1e9:.2f} ns")
    if engine.get("strided_element_cached") is not None:
        table.add_row(
            "per strided element, from a chunk in the CPU's caches",
            f"{engine['strided_element_cached'] * 1e9:.2f} ns",
        )
    if engine.get("scattered_store") is not None:
        table.add_row(
            "per element written to a new page of the output (extra)",
            f"{engine['scattered_store'] * 1e9:.2f} ns",
        )
    table.add_row("shard open", f"{engine['shard_open'] * 1e6:.1f} µs")
    table.add_row(
        "parallel efficiency", f"{engine.get('parallel_efficiency', 1.0):.0%} of {profile['threads']} threads"
    )
    console.print(table)
    if profile["codecs"]:
        table = Table(title="codecs on synthetic seismic (one core)")
        for column in ("codec", "ratio", "decode MB/s", "encode MB/s"):
            table.add_column(column, justify="right")
        for c in profile["codecs"]:
            table.add_row(
                c["name"], f"{c['ratio']:.2f}", f"{c['decode'] / 1e6:,.0f}", f"{c['encode'] / 1e6:,.0f}"
            )
        console.print(table)


def plot_profile(profile: dict, path: Path) -> None:
    """Cold read throughput against requests in flight, one line per request size."""
    from .png import pyplot

    plt = pyplot()

    io = profile["io"]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for size, row in zip(io["sizes"], io.get("cold_measured") or io["cold"], strict=True):
        ax.plot(io["depths"], [v / 1e6 for v in row], marker="o", label=_size(size))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("requests in flight (queue depth)")
    ax.set_ylabel("cold read throughput (MB/s)")
    ax.set_title(f"{profile.get('host', '')}: {profile['path']}")
    ax.grid(True, alpha=0.3)
    ax.legend(title="request size", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plan_command(
    source: Annotated[
        str | None, typer.Argument(help="SEG-Y file or cube store (or give --shape)", show_default=False)
    ] = None,
    shape: Annotated[
        str | None,
        typer.Option(
            callback=checked(parse_shape), help="Array shape instead of a source, e.g. 600,800,1000"
        ),
    ] = None,
    dtype: Annotated[str, typer.Option(callback=checked(check_plan_dtype), help="Element type")] = "float32",
    layout: LayoutOption = defaults.LAYOUT,
    access: AccessOption = None,
    compress: Annotated[
        str | None, typer.Option(help="Compression the store will use [default: none, or a store's own]")
    ] = None,
    profile: Annotated[
        Path | None, typer.Option(help="Profile file (default: the one for SOURCE's disk)")
    ] = None,
    state: Annotated[
        str,
        typer.Option(
            callback=checked(check_state),
            help="Objective counts both reads (warm weighed by memory over disk rate), or warm or cold",
        ),
    ] = defaults.PLAN_STATE,
    top: Annotated[int, typer.Option(callback=at_least(1), help="Layouts to show")] = defaults.PLAN_TOP,
    explain: Annotated[bool, typer.Option(help="Show each access's requests, bytes and work")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Choose chunk and shard shapes, with predicted read times per access and the runners-up.

    Given a store, also predict the layouts it has (its volume's and its views') beside the pick.
    """
    from .plan import plan, plan_store
    from .profiles import find_profile

    if (source is None) == (shape is None):
        raise typer.BadParameter("give a SEG-Y file or store, or --shape")
    # Taken as text, then refused if a URL: a Path would make s3://b/k s3:/b/k, a folder not there.
    path = local_only(source, "plan") if source is not None else None
    near = path if path is not None else Path.cwd()
    store = None
    if shape is not None:
        dims = parse_shape(shape)
    elif path is not None and path.is_file():
        from .ingest import describe_segy

        info = describe_segy(path)
        dims = [info["inline"]["count"], info["crossline"]["count"], info["samples_per_trace"]]
        if info.get("offset"):
            dims.insert(2, info["offset"]["count"])
    elif path is not None:
        compared = plan_store(
            path, layout=layout, access=access, compress=compress, profile=profile, state=state, top=top
        )
        plans, store = compared["plans"], compared["store"]
        dims, dtype = store["shape"], store["dtype"]
    if store is None:
        plans = plan(
            dims,
            dtype,
            layout=layout,
            access=access,
            compress=compress,
            profile=profile,
            near=near,
            state=state,
            top=top,
        )
    if as_json:
        console.print_json(json.dumps({"plans": plans, "store": store}))
        return
    machine = "measured profile" if find_profile(near, profile) else "built-in typical machine (no profile)"
    console.print(f"array {dims} {dtype}, planned on the {machine}")
    print_plans(plans, explain, store, layout)


def _print_whole(table: Table) -> None:
    """Print a table at its natural width even where that is wider than the console (a pipe
    counts as 80 columns): cut-short headings and numbers split over lines are worse than a
    long line."""
    natural = console.measure(table, options=console.options.update_width(1000)).maximum
    wide = console.width
    console.width = max(wide, natural)
    try:
        console.print(table)
    finally:
        console.width = wide


def _times(plan: dict) -> list[str]:
    """Each access's predicted "warm / cold" milliseconds."""
    return [f"{_ms(a['warm']['seconds'])} / {_ms(a['cold']['seconds'])}" for a in plan["accesses"]]


def objective_caption(weights: dict) -> str:
    """What the objective column adds up, in words."""
    if not weights["cold"]:
        return "objective: the slowest weighted access warm"
    if not weights["warm"]:
        return "objective: the slowest weighted access cold"
    k = weights["warm"]
    return (
        f"objective: the slowest weighted access cold + {k:.1f} x the slowest warm "
        f"({k:.1f}: how many times faster this machine checks bytes in memory than its disk streams them)"
    )


def store_verdict(pick: float, store: dict, layout: str) -> str:
    """One sentence: whether the pick would read this store's slowest access faster, and by how much."""
    routed = "each access read from its fastest copy, " if len(store["copies"]) > 1 else ""
    text = (
        f"This store ({store['compression']}), {routed}scores {_ms(store['score'])} ms on the objective; "
        f"the pick, {_ms(pick)} ms: "
    )
    if pick >= store["score"] * 0.9:
        return text + "this store's layout is within 10 % of it or better."
    text += f"{store['score'] / pick:.1f}x faster."
    if store["source"]:
        text += f" Ingest {store['source']} again with --layout {layout} to use it."
    return text


def print_plans(plans: list[dict], explain: bool, store: dict | None = None, layout: str = "auto") -> None:
    names = [a["access"] for a in plans[0]["accesses"]]
    table = Table(
        title="layouts, best first (times in ms: warm / cold)", caption=objective_caption(plans[0]["weights"])
    )
    table.add_column("chunks / shards")
    for name in names:
        table.add_column(name, justify="right")
    table.add_column("objective", justify="right")
    table.add_column("padding", justify="right")
    for i, p in enumerate(plans):
        label = "x".join(map(str, p["layout"]["inner"])) + "\n/ " + "x".join(map(str, p["layout"]["shard"]))
        style = "bold green" if i == 0 else None
        table.add_row(label, *_times(p), _ms(p["score"]), f"{p['padding']:.2%}", style=style)
    if store is not None:
        table.add_section()
        for copy in store["copies"]:
            label = f"this store's\n{copy['name']}\n" + copy["layout"].replace("/", "\n/ ")
            table.add_row(label, *_times(copy["plan"]), _ms(copy["plan"]["score"]), "", style="yellow")
    _print_whole(table)
    if store is not None:
        console.print(escape(store_verdict(plans[0]["score"], store, layout)))
    if not explain:
        return
    best = plans[0]
    table = Table(
        title="the pick, explained (cold: what goes to the device; sizes in MiB, times in ms)",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        collapse_padding=True,
        pad_edge=False,
    )
    columns = ("access", "", "chunks", "shards", "reqs", "device", "touched", "output", "io", "cpu", "total")
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i < 2 else "right")
    mib = 1 << 20
    for a in best["accesses"]:
        for state in ("warm", "cold"):
            p = a[state]
            cold = state == "cold"
            table.add_row(
                a["access"] if not cold else "", state, str(p["chunks"]), str(p["shards"]),
                str(p["requests"]) if cold else "-", f"{p['device_bytes'] / mib:.3g}" if cold else "-",
                f"{p['touched_bytes'] / mib:.3g}", f"{p['output_bytes'] / mib:.3g}",
                _ms(p["io_seconds"]), _ms(p["cpu_seconds"]), _ms(p["seconds"]),
            )  # fmt: skip
    _print_whole(table)
    console.print(
        "io: device time at the queue depth the reader keeps; cpu: checksum, decode and copy work summed "
        "over threads; total: wall time with io and cpu overlapped, shards' indexes read first."
    )
