"""The ``cubeslab read`` command (registered by :mod:`cubeslab.cli`): a plane or a window of a store
to .npy or .png, or an MSI store's ion image or spectrum."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape

from .errors import InvalidInputError, OptionError
from .locations import S3Path, store_path

console = Console()


def read_command(
    store: Annotated[str, typer.Argument(help="Cube store: a folder, or s3://bucket/key")],
    output_name: Annotated[str, typer.Option("--output", "-o", help="Output .npy or .png")],
    inline: Annotated[float | None, typer.Option(help="Inline number")] = None,
    crossline: Annotated[float | None, typer.Option(help="Crossline number")] = None,
    time: Annotated[float | None, typer.Option("--time", "--depth", help="Sample time (ms) or depth")] = None,
    window: Annotated[str | None, typer.Option(help="Positions, numpy style: '0:10,5,::2'")] = None,
    ion_image: Annotated[float | None, typer.Option(help="MSI: the ion image at this m/z")] = None,
    tol: Annotated[
        str, typer.Option(help="MSI: the ion image's half-width, Da (0.01) or ppm (10ppm)")
    ] = "10ppm",
    spectrum: Annotated[str | None, typer.Option(help="MSI: the spectrum at pixel X,Y")] = None,
) -> None:
    """Read a plane (by survey label) or a window (by position) to .npy or .png; of an MSI store, an
    ion image or a spectrum (a plot with an m/z axis)."""
    from . import open as open_cube
    from .cube import VERTICAL_NAMES

    output = local_output(output_name)
    chosen = [x is not None for x in (inline, crossline, time, window, ion_image, spectrum)]
    if sum(chosen) != 1:
        raise typer.BadParameter(
            "give exactly one of --inline, --crossline, --time, --window, --ion-image, --spectrum"
        )
    if output.suffix not in (".npy", ".png"):
        raise typer.BadParameter(
            f"{output}: the output is written as .npy or .png; name the file with one of those suffixes",
            param_hint="'--output'",
        )
    cube = open_cube(store)
    if ion_image is not None or spectrum is not None:
        read_msi(cube, output, ion_image, tol, spectrum)
        return
    axes = None
    for option, value, d, names in (
        ("--inline", inline, 0, ("inline",)),
        ("--crossline", crossline, 1, ("crossline",)),
        ("--time/--depth", time, cube.ndim - 1, VERTICAL_NAMES),
    ):
        if value is not None and (d >= cube.ndim or cube.dims[d] not in names):
            raise OptionError(
                f"{store}: {option} reads a survey's axis {' or '.join(names)}; this store's axes are "
                f"{', '.join(cube.dims)}: choose positions with --window"
            )
    # Whole numbers typed at the shell are the survey's integer labels (5000, not 5000.0).
    inline, crossline, time = (
        v if v is None or not v.is_integer() else int(v) for v in (inline, crossline, time)
    )
    if inline is not None:
        data, title, kept = cube.inline[inline], f"inline {inline:g}", (1, cube.ndim - 1)
    elif crossline is not None:
        data, title, kept = cube.crossline[crossline], f"crossline {crossline:g}", (0, cube.ndim - 1)
    elif time is not None:
        data, title, kept = cube.time_slice[time], f"{cube.vertical} {time:g}", (0, 1)
    else:
        data, title, kept = cube[parse_window(window or "")], f"window {window}", None
    if kept is not None and cube.ndim == 3:
        axes = tuple((cube.dims[d], cube.coords[cube.dims[d]]) for d in kept)
    if output.suffix == ".png":
        from .png import save_png  # matplotlib loads only for pictures

        save_png(data, output, title, axes)
    else:
        np.save(output, data)
    console.print(f"wrote {data.shape} {data.dtype} to {escape(str(output))}")


def local_output(text: str) -> Path:
    """A file a command writes: on this machine (a file:// URL too). An object storage URL is refused,
    never taken for a folder named ``s3:``."""
    where = store_path(text)
    if isinstance(where, S3Path):
        raise InvalidInputError(f"{text}: the output is written on this machine, not to object storage")
    return where


def read_msi(cube, output: Path, mz: float | None, tol: str, pixel: str | None) -> None:
    from .msi import MsiCube

    if not isinstance(cube, MsiCube):
        raise InvalidInputError(
            f"{cube.path}: --ion-image and --spectrum read MSI stores (ingested from imzML)"
        )
    if mz is not None:
        data, title = cube.ion_image(mz, tol=tol), f"m/z {mz:g} ± {tol}"
    else:
        try:
            x, y = (int(v) for v in (pixel or "").split(","))
        except ValueError:
            raise typer.BadParameter(f"--spectrum {pixel!r}: give the pixel as X,Y") from None
        mzs, values = cube.spectrum(x, y)
        data, title = np.stack([mzs, values.astype(np.float64)]), f"spectrum at x={x}, y={y}"
    if output.suffix == ".npy":
        np.save(output, data)
    else:
        from .png import save_ion_image_png, save_spectrum_png

        if mz is not None:
            save_ion_image_png(data, output, title, (("x", cube.coords["x"]), ("y", cube.coords["y"])))
        else:
            save_spectrum_png(data[0], data[1], output, title)
    console.print(f"wrote {data.shape} {data.dtype} to {escape(str(output))}")


def parse_window(text: str) -> tuple:
    def part(p: str):
        p = p.strip()
        if ":" not in p:
            return int(p)
        bounds = p.split(":")
        if len(bounds) > 3:
            raise ValueError(p)
        return slice(*(int(x) if x.strip() else None for x in bounds))

    try:
        return tuple(part(p) for p in text.split(","))
    except ValueError:
        raise OptionError(f"--window {text!r}: not a window; use e.g. '0:10,5,::2'") from None
