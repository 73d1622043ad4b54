"""SEG-Y sample format codes and the numpy types that hold them exactly."""

from __future__ import annotations

import os

from .errors import InvalidInputError

NATIVE_DTYPES = {
    1: "float32",
    2: "int32",
    3: "int16",
    4: "float32",
    5: "float32",
    6: "float64",
    7: "int32",
    8: "int8",
    9: "int64",
    10: "uint32",
    11: "uint16",
    12: "uint64",
    15: "uint32",
    16: "uint8",
}


def format_code(path: str | os.PathLike, endian: str = "auto") -> int:
    """The sample format code of a SEG-Y file (binary header byte 3225)."""
    with open(path, "rb") as f:
        f.seek(3224)
        raw = f.read(2)
    if len(raw) < 2:
        raise InvalidInputError(f"{path}: file is too short for a SEG-Y binary header")
    orders = {"big": ["big"], "little": ["little"], "auto": ["big", "little"]}[endian]
    for order in orders:
        code = int.from_bytes(raw, order, signed=True)
        if code in NATIVE_DTYPES:
            return code
    raise InvalidInputError(f"{path}: data sample format code at byte 3225 is not a valid code")


def native_dtype(path: str | os.PathLike, endian: str = "auto") -> str:
    """The numpy type that holds every sample of the file exactly."""
    return NATIVE_DTYPES[format_code(path, endian)]
