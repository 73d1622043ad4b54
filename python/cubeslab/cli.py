"""The ``cubeslab`` command: ingest, info, read, export, demo, verify, describe, create, pyramid, view,
profile, plan, bench.

Exit codes: 0 success, 1 a cubeslab error (the message says what and where),
2 bad command-line usage, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import json
import sys
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import defaults, plan_cli
from .array import zarr_json
from .cli_progress import PhaseBars
from .defaults import HELP
from .errors import (
    CubeslabError,
    ExportWarning,
    IngestWarning,
    InvalidInputError,
    OptionError,
    StoreNotFoundError,
)
from .locations import S3Path, store_path
from .plan import check_access, check_compress, check_dtype
from .read_cli import read_command
from .sizes import parse_size, size_text
from .store_report import error_summary, store_report
from .viewer.command import view_command

app = typer.Typer(
    help="Make huge N-D volumes instantly sliceable.", no_args_is_help=True, add_completion=False
)
console = Console()
errors = Console(stderr=True)


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        console.print(f"cubeslab {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit"),
    ] = False,
) -> None:
    """Make huge N-D volumes instantly sliceable."""


def size_option(text: str) -> int:
    """Typer parser of a size option: a bad value is a usage error naming the option."""
    try:
        return parse_size(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


class DemoSize(StrEnum):
    small = "small"
    full = "full"


class Endian(StrEnum):
    auto = "auto"
    big = "big"
    little = "little"


DEFAULT_ENDIAN = Endian(defaults.ENDIAN)


class Order(StrEnum):
    C = "C"
    F = "F"


def parse_shape(text: str) -> tuple[int, ...]:
    """'600,800,1000' -> (600, 800, 1000); anything else is a usage error naming --shape."""
    try:
        return tuple(int(part) for part in text.replace("x", ",").split(","))
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: give the sides as integers, e.g. 600,800,1000", param_hint="'--shape'"
        ) from None


def header_byte(help: str):
    """A trace header byte position option: the first of a 4-byte field, 1 to 237."""
    return typer.Option(min=defaults.HEADER_BYTES[0], max=defaults.HEADER_BYTES[1], help=help)


def _defaulted(context: typer.Context, name: str) -> bool:
    """Whether the option ``name`` took its default (not given on the command line or by a variable)."""
    # By name: typer carries its own copy of click, whose enum is not click's.
    return getattr(context.get_parameter_source(name), "name", None) in ("DEFAULT", "DEFAULT_MAP")


@app.command()
def ingest(
    context: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            help="SEG-Y, imzML, HDF5, NetCDF, FITS, SEPlib (.H) or .npy file, or raw bytes (with --shape)"
        ),
    ],
    store: Annotated[str, typer.Argument(help="Zarr store to create: a folder, or s3://bucket/key")],
    overwrite: Annotated[bool, typer.Option(help=HELP["overwrite"])] = False,
    resume: Annotated[bool, typer.Option(help=HELP["resume"])] = False,
    durable: Annotated[bool, typer.Option(help=HELP["durable"])] = False,
    dtype: Annotated[
        str, typer.Option(callback=plan_cli.checked(check_dtype), help=HELP["dtype"])
    ] = defaults.DTYPE,
    compress: Annotated[
        str, typer.Option(callback=plan_cli.checked(check_compress), help=HELP["compress"])
    ] = defaults.COMPRESS,
    max_error: Annotated[
        str | None,
        typer.Option(help="ZFP with every sample's error within this: absolute (0.5) or of the RMS (0.5%)"),
    ] = None,
    layout: plan_cli.LayoutOption = defaults.LAYOUT,
    access: plan_cli.AccessOption = None,
    views: Annotated[
        str | None, typer.Option(callback=plan_cli.checked(check_access), help=HELP["views"])
    ] = None,
    profile: Annotated[Path | None, typer.Option(help=HELP["profile"])] = None,
    memory_limit: Annotated[
        int, typer.Option(parser=size_option, metavar="SIZE", help=HELP["memory_limit"])
    ] = size_text(defaults.MEMORY_LIMIT),  # type: ignore[assignment]
    threads: Annotated[int | None, typer.Option(min=1, help=HELP["threads"])] = None,
    endian: Annotated[Endian, typer.Option(help=HELP["endian"])] = DEFAULT_ENDIAN,
    inline_byte: Annotated[int, header_byte(HELP["inline_byte"])] = defaults.INLINE_BYTE,
    crossline_byte: Annotated[int, header_byte(HELP["crossline_byte"])] = defaults.CROSSLINE_BYTE,
    offset_byte: Annotated[int, header_byte(HELP["offset_byte"])] = defaults.OFFSET_BYTE,
    allow_truncated: Annotated[bool, typer.Option(help=HELP["allow_truncated"])] = False,
    sample_interval: Annotated[float | None, typer.Option(help=HELP["sample_interval_us"])] = None,
    depth: Annotated[bool, typer.Option(help="The vertical axis is depth, not time")] = False,
    shape: Annotated[
        str | None, typer.Option(help="Raw bytes: the array's shape, e.g. 600,800,1000 (--dtype: its type)")
    ] = None,
    order: Annotated[Order, typer.Option(help="Raw bytes: C (last axis fastest) or F")] = Order.C,
    offset: Annotated[int, typer.Option(help="Raw bytes: where the array's first byte is")] = 0,
    hdu: Annotated[int | None, typer.Option(help="FITS: the HDU (default: the first with an image)")] = None,
    dataset: Annotated[str | None, typer.Option(help="HDF5: the dataset (default: the only N-D one)")] = None,
    variable: Annotated[
        str | None, typer.Option(help="NetCDF: the variable, grp/v in a group (default: the only one)")
    ] = None,
    mz_bin: Annotated[
        str | None,
        typer.Option(help="imzML, processed: m/z bin width, 0.01 (Da) or 10ppm (default: from the data)"),
    ] = None,
    mz_range: Annotated[
        str | None,
        typer.Option(help="imzML, processed: the m/z range binned, LOW:HIGH (default: every peak)"),
    ] = None,
    pyramid: Annotated[
        bool, typer.Option(help="Then write overview levels for viewing (as `cubeslab pyramid`)")
    ] = False,
    scheduler: Annotated[
        str | None,
        typer.Option(
            help="SEG-Y: run as tasks on the Dask cluster whose scheduler is here (tcp://host:8786); "
            "its workers must see the source and the store's folder at the same paths"
        ),
    ] = None,
) -> None:
    """Reorganise a SEG-Y, imzML, HDF5, NetCDF, FITS, SEPlib, .npy or raw file into a sharded Zarr store."""
    from . import ingest as run_ingest

    with warnings.catch_warnings(record=True) as noted, PhaseBars(errors) as bars:
        warnings.simplefilter("always", IngestWarning)
        summary = run_ingest(
            source, store, overwrite=overwrite, resume=resume, durable=durable,
            dtype=None if _defaulted(context, "dtype") else dtype,  # given, refused where it does not apply
            compress=compress, max_error=max_error, layout=layout, access=access,
            views=[v for v in (views or "").split(",") if v.strip()], profile=profile,
            memory_limit=memory_limit, threads=threads, endian=endian.value,
            inline_byte=inline_byte, crossline_byte=crossline_byte, offset_byte=offset_byte,
            allow_truncated=allow_truncated, sample_interval_us=sample_interval,
            vertical="depth" if depth else "time", progress=bars.update,
            shape=parse_shape(shape) if shape is not None else None, order=order.value, offset=offset,
            hdu=hdu, dataset=dataset, variable=variable, mz_bin=mz_bin, mz_range=mz_range, client=scheduler,
            pyramid=pyramid,
        )  # fmt: skip
    for warning in noted:
        errors.print(f"[yellow]warning:[/] {escape(str(warning.message))}")
    if "live_traces" not in summary:  # an array file
        shape_text = "x".join(map(str, summary["shape"]))
        console.print(f"[green]ingested[/] {shape_text} {summary['dtype']} into {escape(str(store))}")
        if "mz_bin" in summary:
            console.print(
                f"m/z bins {summary['mz_bin']} over {summary['mz_range'][0]:g}..{summary['mz_range'][1]:g}: "
                f"{summary['outside_range']:,} peaks outside, {summary['merged']:,} merged into a filled bin"
            )
        console.print(f"layout {summary['plan']['layout']}, {summary['stored_bytes'] / 1e6:,.1f} MB")
    else:
        live, missing = summary["live_traces"], summary["missing_traces"]
        console.print(f"[green]ingested[/] {live} traces ({missing} missing) into {escape(str(store))}")
        plan, size = summary["plan"], summary["stored_bytes"] / 1e6
        console.print(f"layout {plan['layout']} ({plan['strategy']}), {size:,.1f} MB")
    for access, view in summary.get("views", {}).items():
        extra = view["stored_bytes"] / max(summary.get("volume_bytes", summary["stored_bytes"]), 1)
        console.print(
            f"view for {access}: layout {view['layout']}, {view['stored_bytes'] / 1e6:,.1f} MB "
            f"(+{extra:.0%} of the volume on disk)"
        )


@app.command()
def info(
    path: Annotated[str, typer.Argument(help="Store (a folder or s3:// URL), or a file to describe")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    endian: Annotated[Endian, typer.Option(help=HELP["endian"])] = DEFAULT_ENDIAN,
    inline_byte: Annotated[int, header_byte(HELP["inline_byte"])] = defaults.INLINE_BYTE,
    crossline_byte: Annotated[int, header_byte(HELP["crossline_byte"])] = defaults.CROSSLINE_BYTE,
    offset_byte: Annotated[int, header_byte(HELP["offset_byte"])] = defaults.OFFSET_BYTE,
) -> None:
    """Geometry, layout, size, compression ratio and completeness of a store (or what a SEG-Y file holds)."""
    from .file_report import describe_file

    where = store_path(path)
    if isinstance(where, S3Path):
        show_report(store_report(where), as_json)
        return
    if not where.is_file():
        try:
            report = store_report(where)
        except StoreNotFoundError:
            if where.exists():
                raise
            # Nothing there, nor an interrupted ingest's staging folder (store_report found none).
            raise StoreNotFoundError(f"{path}: no such file or folder") from None
    elif (described := describe_file(where)) is not None:
        report = described
    else:
        from .ingest import describe_segy

        report = describe_segy(
            where,
            endian=endian.value,
            inline_byte=inline_byte,
            crossline_byte=crossline_byte,
            offset_byte=offset_byte,
        )
        text = report.pop("text_header")
        if not as_json:
            report.pop("binary_header")
            console.print(escape(text))
    show_report(report, as_json)


def show_report(report: dict, as_json: bool) -> None:
    if as_json:
        console.print_json(zarr_json(report))
        return
    table = Table(show_header=False, box=None)
    for key, value in report.items():
        table.add_row(f"[bold]{key}[/]", escape(str(value)))
    console.print(table)


app.command("read")(read_command)


@app.command()
def export(
    store: Annotated[str, typer.Argument(help="Cube store: a folder, or s3://bucket/key")],
    output: Annotated[str, typer.Argument(help="SEG-Y file to write, or .npy, SEPlib .H, .h5, .nc or .fits")],
    format: Annotated[int | None, typer.Option(help="Sample format code (default: the source's)")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing file")] = False,
    compress: Annotated[
        str | None, typer.Option(help="deflate or deflate:LEVEL (1-9) for .h5 and .nc (default: none)")
    ] = None,
) -> None:
    """Write a survey store back to SEG-Y, or any store to .npy, SEPlib (.H and its binary .H@), HDF5,
    NetCDF 4 or FITS."""
    from . import export as run_export
    from .sources import FORMAT_BY_SUFFIX

    with warnings.catch_warnings(record=True) as noted:
        warnings.simplefilter("always", ExportWarning)
        n = run_export(store, output, format=format, overwrite=overwrite, compress=compress)
    for warning in noted:
        errors.print(f"[yellow]warning:[/] {escape(str(warning.message))}")
    what = "elements" if Path(output).suffix in FORMAT_BY_SUFFIX else "traces"
    console.print(f"wrote {n:,} {what} to {escape(str(output))}")


@app.command()
def demo(
    directory: Annotated[Path, typer.Option("--dir", help="Where to put the demo data")] = Path("demo-data"),
    size: Annotated[DemoSize, typer.Option(help="small (tests) or full (~300 MB)")] = DemoSize.full,
    repeats: Annotated[int, typer.Option(help="Timed repeats per plane")] = 5,
) -> None:
    """Generate a synthetic survey, ingest it, time plane reads beside segyio, write PNGs."""
    from .demo import run_demo

    run_demo(directory, size=size.value, repeats=repeats, console=console)


@app.command()
def verify(
    store: Annotated[str, typer.Argument(help="Store (or array) to check")],
    against: Annotated[
        str | None,  # text: a Path would make a URL s3:/b/k
        typer.Option(
            help="The file the store was ingested from (SEG-Y or an N-D array file), to compare with"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    threads: Annotated[int | None, typer.Option(min=1, help="Worker threads (default: all cores)")] = None,
) -> None:
    """Re-read every chunk with checksums; report damaged, missing or unfinished parts, and the error
    against the source. Exits 1 if anything is wrong."""
    from .verify import verify as run_verify

    report = run_verify(store, against=against, threads=threads)
    if as_json:
        console.print_json(zarr_json(report))
    else:
        print_verify(report)
    if not report["ok"]:
        raise typer.Exit(1)


def print_verify(report: dict) -> None:
    table = Table(title=f"verify {escape(report['store'])}: state {report['state']}")
    for column in ("array", "shards", "read back", "absent", "bad chunks"):
        table.add_column(column, justify="left" if column == "array" else "right")
    for name, a in report["arrays"].items():
        bad = len(a["bad"])
        table.add_row(
            escape(name), str(a["shards"]), str(a["shards_read"]), str(a["absent_shards"]),
            f"[red]{bad}[/]" if bad else "0",
        )  # fmt: skip
    console.print(table)
    for name, a in report["arrays"].items():
        for b in a["bad"]:
            console.print(f"[red]bad[/] {escape(name)}/{escape(b['chunk'])}: {escape(b['error'])}")
    for u in report["unreadable"]:
        console.print(f"[red]unreadable[/] {escape(u['array'])}: {escape(u['error'])}")
    for f in report["leftovers"]:
        console.print(f"[yellow]leftover temporary file[/] {escape(f)}")
    if "against" in report:
        a = report["against"]
        compared = f"{a['traces']} traces" if "traces" in a else f"{a['values']:,} values"
        console.print(f"against {escape(a['source'])} ({compared}): {error_summary(a)}")
        worst = a.get("worst_chunk_max_abs_error")
        if worst:
            largest = "inf" if worst["max_abs_error"] is None else f"{worst['max_abs_error']:.4g}"
            console.print(f"largest error in chunk {escape(worst['chunk'])}: {largest}")
        if "problem" in a:
            console.print(f"[red]{escape(a['problem'])}[/]")
    if "pyramid" in report:
        levels = ", ".join(report["pyramid"]["levels"]) or "none"
        console.print(f"overview levels ({report['pyramid']['method']}): {escape(levels)}")
        for problem in report["pyramid"]["problems"]:
            console.print(f"[red]overview levels {escape(problem)}[/]")
    console.print("[green]ok[/]" if report["ok"] else "[red]problems found[/]")


@app.command()
def pyramid(
    store: Annotated[str, typer.Argument(help="Store to add overview levels to")],
    axes: Annotated[
        str | None, typer.Option(help="Dimensions halved per level, e.g. inline,crossline (default: all)")
    ] = None,
    method: Annotated[str, typer.Option(help="mean (default; see docs) or decimate")] = "mean",
    max_side: Annotated[
        int, typer.Option(help="Levels are added until no halved axis is longer than this")
    ] = defaults.PYRAMID_MAX_SIDE,
    memory_limit: Annotated[
        int, typer.Option(parser=size_option, metavar="SIZE", help=HELP["memory_limit"])
    ] = size_text(defaults.MEMORY_LIMIT),  # type: ignore[assignment]
) -> None:
    """Write overview levels (2x downsampled copies, OME-Zarr multiscales) for viewing whole planes."""
    from .pyramid import build_pyramid

    chosen = [a.strip() for a in axes.split(",") if a.strip()] if axes else None
    described = build_pyramid(store, axes=chosen, method=method, max_side=max_side, memory_limit=memory_limit)
    levels = described["cubeslab"]["pyramid"]["levels"]
    for level in levels:
        console.print(f"{escape(level['array'])}: 1/{'x1/'.join(map(str, level['factors']))}")
    console.print(f"[green]{len(levels)} overview levels[/] in {escape(store)}")


@app.command()
def describe(
    store: Annotated[str, typer.Argument(help="Store to describe")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON description")] = False,
) -> None:
    """The store's description: axes (name, size, origin, step, unit), dtype, layout, codec, fill value
    and attributes; `create --from-json` makes an empty store from it."""
    from .description import describe as run_describe
    from .description import is_labels

    description = run_describe(store)
    if as_json:
        console.print_json(zarr_json(description))
        return
    table = Table("axis", "size", "origin", "step", "unit")
    for axis in description["axes"]:
        regular = axis.get("values") is None
        uneven = "labels" if not regular and is_labels(axis["values"]) else "uneven"
        origin, step = (f"{axis['origin']:g}", f"{axis['step']:g}") if regular else (uneven, "")
        table.add_row(escape(axis["name"]), str(axis["size"]), origin, step, escape(str(axis["unit"] or "")))
    console.print(table)
    for key in ("dtype", "chunks", "shards", "compress", "fill_value", "attributes"):
        console.print(f"[bold]{key}[/] {escape(json.dumps(description[key]))}")


@app.command()
def create(
    store: Annotated[
        str, typer.Argument(help="Store to create: a folder that does not exist yet, or s3://bucket/key")
    ],
    from_json: Annotated[
        Path, typer.Option("--from-json", help="A description, as `describe --json` prints")
    ],
) -> None:
    """Create an empty store from a JSON description."""
    from .create import create as run_create

    try:
        description = json.loads(from_json.read_text())
    except OSError as error:
        raise CubeslabError(f"{from_json}: cannot read it: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise CubeslabError(f"{from_json}: not JSON: {error}") from None
    try:
        run_create(store, description=description).close()
    except InvalidInputError as error:
        # The description's own problem (a field, a type) is the file's: name it.
        if not str(error).startswith(str(store)):
            raise type(error)(f"{from_json}: {error}") from None
        raise
    console.print(f"created {escape(str(store))}")


app.command("profile")(plan_cli.profile_command)
app.command("plan")(plan_cli.plan_command)
app.command("view")(view_command)


@app.command(
    "bench",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def bench(ctx: typer.Context) -> None:
    """Re-run the published studies beside today's tools (from the repository's bench/ folder;
    `cubeslab bench --help` there lists the studies and options)."""
    try:
        from cubeslab_bench.cli import command
    except ImportError:
        raise CubeslabError(BENCH_MISSING) from None
    command.main(list(ctx.args), prog_name="cubeslab bench", standalone_mode=False)


def _one_line_summaries() -> None:
    """Give each command the first paragraph of its docstring as its summary in ``cubeslab --help``,
    on one line: typer keeps a docstring's line breaks there, cutting sentences where the source wraps."""
    for info in app.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None)
        if info.short_help is None and doc:
            info.short_help = " ".join(doc.split("\n\n")[0].split())


_one_line_summaries()


BENCH_MISSING = (
    "cubeslab bench re-runs the benchmark studies, which live in the bench/ folder of the cubeslab "
    "repository and are not installed with the package: in a clone, run `make bench`, or install the "
    "extra (pip install '.[bench]': plotting and the tools measured beside cubeslab) and run "
    "`PYTHONPATH=bench cubeslab bench ...`"
)


INTERRUPTED = 130
"""Exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it."""


def run(args: list[str] | None = None) -> int:
    """Run the command line ``args`` (default: ``sys.argv[1:]``); returns the exit code:
    0 success, 1 a cubeslab error, 2 a usage error, 130 interrupted."""
    try:
        code = app(args=args, prog_name="cubeslab", standalone_mode=False)
    except CubeslabError as error:
        errors.print(f"[red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        return 2 if isinstance(error, OptionError) else 1
    except KeyboardInterrupt:
        code = INTERRUPTED
    except OSError as error:
        if error.filename is None:
            raise
        # The system's refusal of a file the user named (a folder that does not exist, a folder
        # where a file goes): said as such, not as a traceback.
        errors.print(f"[red]error:[/] {escape(str(error.filename))}: {escape(error.strerror or str(error))}")
        return 1
    except typer.Exit as exit_:
        code = exit_.exit_code
    except typer.Abort:
        code = INTERRUPTED
    except Exception as error:
        # Click's usage errors (bad option value, unknown option, missing argument). Matched by
        # shape, not class: typer carries its own copy of click, whose classes are not click's.
        show, exit_code = getattr(error, "show", None), getattr(error, "exit_code", None)
        if callable(show) and isinstance(exit_code, int):
            show()
            return exit_code
        raise
    # Typer turns Ctrl-C into exit code 130 and returns it without a word.
    if code == INTERRUPTED:
        errors.print(
            "[yellow]interrupted[/]; a store being written stays marked incomplete: "
            "continue it with --resume, or start again with --overwrite"
        )
    return code if isinstance(code, int) else 0


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
