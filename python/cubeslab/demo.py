"""`cubeslab demo`: a synthetic survey, ingested and read beside segyio."""

from __future__ import annotations

import importlib.util
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.table import Table

T = TypeVar("T")

SIZES = {"small": (40, 50, 60), "full": (300, 400, 600)}


def timed(fn: Callable[[], T], repeats: int) -> tuple[float, T]:
    """Median seconds of ``repeats`` calls (after one warm-up call), and the last result."""
    result = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def run_demo(
    directory: Path, *, size: str = "full", repeats: int = 5, console: Console | None = None
) -> dict:
    """Run the demo; returns the timings (seconds) per plane and tool."""
    import cubeslab
    from cubeslab.plan import profile_for_ingest
    from cubeslab.png import save_png
    from cubeslab.synthetic import SyntheticSurvey, write_segy

    console = console or Console()
    pictures = importlib.util.find_spec("matplotlib") is not None
    if not pictures:
        console.print("matplotlib is not installed: no PNGs of the planes (pip install 'cubeslab[plot]')")
    directory.mkdir(parents=True, exist_ok=True)
    shape = SIZES[size]
    survey = SyntheticSurvey(*shape)
    sgy = directory / f"synthetic-{size}.sgy"
    if not sgy.exists():
        console.print(f"writing synthetic survey {shape} to {sgy} ...")
        write_segy(sgy, survey)
    store = directory / f"synthetic-{size}.zarr"
    with console.status("measuring this disk, once (a quick profile the layout planner uses) ..."):
        t0 = time.perf_counter()
        _, measured = profile_for_ingest(store, None, sgy.stat().st_size)
    if measured:
        console.print(f"measured this disk in {time.perf_counter() - t0:.1f} s (saved for next time)")
    t0 = time.perf_counter()
    cubeslab.ingest(sgy, store, overwrite=True)
    ingest_s = time.perf_counter() - t0
    mb = sgy.stat().st_size / 1e6
    console.print(f"ingested {mb:.0f} MB in {ingest_s:.2f} s ({mb / ingest_s:.0f} MB/s)")

    cube = cubeslab.open(store)
    unverified = cubeslab.open(store, verify=False)
    il = int(cube.coords["inline"][shape[0] // 2])
    xl = int(cube.coords["crossline"][shape[1] // 2])
    t = float(cube.coords["time"][shape[2] // 2])
    planes = {
        "inline": (lambda c: c.inline[il], f"inline {il}", ("crossline", "time")),
        "crossline": (lambda c: c.crossline[xl], f"crossline {xl}", ("inline", "time")),
        "time slice": (lambda c: c.time_slice[t], f"time {t:g} ms", ("inline", "crossline")),
    }
    results: dict = {"ingest_s": ingest_s, "planes": {}}
    try:
        import segyio
    except ImportError:
        segyio = None
    handle = segyio.open(sgy) if segyio else None
    segyio_reads = (
        {}
        if handle is None
        else {
            "inline": lambda: handle.iline[il],
            "crossline": lambda: handle.xline[xl],
            "time slice": lambda: handle.depth_slice[shape[2] // 2],
        }
    )
    table = Table(title=f"plane reads, median of {repeats} (warm page cache)")
    table.add_column("plane")
    table.add_column("cubeslab ms", justify="right")
    table.add_column("verify off ms", justify="right")
    table.add_column("segyio ms", justify="right")
    table.add_column("segyio ÷ cubeslab", justify="right")
    for name, (read, title, dims) in planes.items():
        ours, data = timed(partial(read, cube), repeats)
        fast = timed(partial(read, unverified), repeats)[0]
        theirs = timed(segyio_reads[name], max(1, repeats // 2))[0] if segyio_reads else float("nan")
        results["planes"][name] = {"cubeslab_s": ours, "cubeslab_unverified_s": fast, "segyio_s": theirs}
        row = (f"{ours * 1e3:.2f}", f"{fast * 1e3:.2f}", f"{theirs * 1e3:.2f}", f"{theirs / ours:.1f}x")
        table.add_row(name, *row)
        if pictures:
            png = directory / f"{name.replace(' ', '_')}.png"
            save_png(data, png, title, tuple((d, cube.coords[d]) for d in dims))
    console.print(table)
    chunks = "x".join(map(str, cube.amplitude.chunks))
    console.print(
        f"cubeslab checks every chunk's crc32c by default, reading whole {chunks} chunks (the layout the "
        "planner chose for this machine); with verify off it touches only the plane's bytes. segyio reads "
        "inlines fast (one run of traces), time slices slowly."
    )
    console.print(f"pictures of the three planes in {directory}/")
    console.print(f"look through the survey in a browser: [bold]cubeslab view {store}[/]", soft_wrap=True)
    if handle:
        handle.close()
    return results
