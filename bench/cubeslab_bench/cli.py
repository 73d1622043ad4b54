"""The ``cubeslab bench`` command: :mod:`cubeslab.cli` hands it its arguments when this package is
on the path (``make bench`` puts it there)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from . import STUDIES, Size, run, tools

console = Console()


def bench_command(
    study: Annotated[str, typer.Argument(help=f"{', '.join(STUDIES)}, or all")],
    size: Annotated[
        Size, typer.Option(help="tiny (seconds), small (make bench), medium, large")
    ] = Size.small,
    peers: Annotated[
        str | None, typer.Option(help="Tools to measure beside cubeslab, e.g. h5py,zarr (default: all)")
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for results JSON, plots and report.html")] = Path(
        "cubeslab-bench"
    ),
    data: Annotated[Path | None, typer.Option(help="Folder for generated inputs (default: OUT/data)")] = None,
    runs: Annotated[int, typer.Option(min=5, help="Timed runs behind each figure (at least 5)")] = 5,
) -> None:
    """Re-run a published study on this machine beside today's tools: JSON, PNGs and an HTML report."""
    names = list(STUDIES) if study == "all" else [study]
    if study != "all" and study not in STUDIES:
        raise typer.BadParameter(f"unknown study {study!r}; choose from {', '.join(STUDIES)} or all")
    try:
        tools.parse_selection(peers)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    report = None
    for name in names:
        console.print(f"[bold]{name}[/] ({size.value}) ...")
        report = run(name, size=size.value, peers=peers, out=out, data=data, runs=runs)
        console.print(f"  wrote {out / (name + '.json')}")
    console.print(f"report: {report}")


app = typer.Typer(add_completion=False)
app.command()(bench_command)
command = typer.main.get_command(app)
"""The command as click runs it, for :mod:`cubeslab.cli` to hand its arguments to."""
