"""SEPlib hypercubes: a ``.H`` header of ``key=value`` pairs (``n1..n6``, ``o1..``, ``d1..``,
``label1..``, ``unit1..``, ``esize``, ``data_format``, ``in=``) and the binary it points at.

Axis 1 varies fastest in the binary, so the store's axes are the header's in reverse: a header with
``n1`` samples per trace, ``n2`` traces per line and ``n3`` lines is stored as (n3, n2, n1), the last
axis fastest as in every C-order array, and the bytes are read as they lie."""

from __future__ import annotations

import math
import os
import shlex
from pathlib import Path

from ..errors import InvalidInputError
from .raw import ArraySource, raw_source

FORMATS = {
    ("xdr_float", 4): ">f4",
    ("native_float", 4): "=f4",
    ("xdr_int", 4): ">i4",
    ("native_int", 4): "=i4",
    ("xdr_double", 8): ">f8",
    ("native_double", 8): "=f8",
}


def is_seplib_header(path: str | os.PathLike) -> bool:
    return Path(path).suffix == ".H"


def parse_header(path: str | os.PathLike) -> dict[str, str]:
    """The header's parameters; a key given twice takes its last value, as SEPlib reads it."""
    text = Path(path).read_text(errors="replace")
    values: dict[str, str] = {}
    for line in text.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError as error:
            raise InvalidInputError(f"{path}: cannot read the line {line!r}: {error}") from None
        for word in words:
            key, sep, value = word.partition("=")
            if sep and key:
                values[key.strip()] = value.strip()
    return values


def _number(path, header: dict[str, str], key: str, default: str, kind: type):
    """The header's ``key`` as an int or a finite float, or an error naming the file and the key."""
    text = header.get(key, default)
    try:
        value = kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise InvalidInputError(f"{path}: {key}={text} is not {what}") from None
    if not math.isfinite(value):
        raise InvalidInputError(f"{path}: {key}={text} is not a finite number")
    return value


def seplib_source(path: str | os.PathLike) -> ArraySource:
    """The binary as an array (axes reversed), with the axes in store order: name, origin, step, unit."""
    header = parse_header(path)
    binary = header.get("in")
    if not binary:
        raise InvalidInputError(f"{path}: the header has no in= (the binary file it describes)")
    if binary == "stdin":
        raise InvalidInputError(f"{path}: in=stdin: the data came through a pipe; cubeslab reads files")
    binary_path = Path(binary) if Path(binary).is_absolute() else Path(path).parent / binary
    if not binary_path.is_file():
        what = "a folder, not a file" if binary_path.is_dir() else "no such file"
        raise InvalidInputError(f"{path}: in={binary}: {what} ({binary_path})")
    esize = _number(path, header, "esize", "4", int)
    data_format = header.get("data_format", "xdr_float").strip('"')
    dtype = FORMATS.get((data_format, esize))
    if dtype is None:
        raise InvalidInputError(
            f"{path}: data_format={data_format} with esize={esize} is not one cubeslab reads "
            f"({', '.join(f'{f} (esize={e})' for f, e in FORMATS)})"
        )
    sizes = []
    for axis in range(1, 7):
        key = f"n{axis}"
        if key not in header:
            continue
        size = _number(path, header, key, "", int)
        if size <= 0:
            raise InvalidInputError(f"{path}: {key}={size}: an axis needs at least one sample")
        sizes.append((axis, size))
    if not sizes:
        raise InvalidInputError(f"{path}: the header gives no axis size (n1=...)")
    while len(sizes) > 1 and sizes[-1][1] == 1:  # trailing axes of one sample are SEPlib's padding
        sizes.pop()
    axes = []
    for axis, _ in reversed(sizes):
        axes.append(
            {
                "name": header.get(f"label{axis}", f"axis{axis}").strip('"') or f"axis{axis}",
                "origin": _number(path, header, f"o{axis}", "0", float),
                "step": _number(path, header, f"d{axis}", "1", float),
                "unit": header.get(f"unit{axis}", "").strip('"') or None,
            }
        )
    shape = [n for _, n in reversed(sizes)]
    source = raw_source(binary_path, shape=shape, dtype=dtype, order="C", offset=0)
    return ArraySource(source.path, source.data, "seplib", axes)
