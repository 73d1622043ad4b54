"""CF's ``_FillValue`` attribute as xarray's Zarr engine keeps it in a Zarr v3 store: for floats, the
base64 text of the value's 8 little-endian bytes (JSON has no NaN, and a float32 fill must come back
bit for bit); other types as they are. Ingest writes it so; export reads it back."""

from __future__ import annotations

import base64
import struct

import numpy as np

from ..array import ZARR_FLOAT_NAMES


def encode(value, dtype: np.dtype):
    """The attribute for a fill ``value`` of an array of ``dtype``."""
    if np.dtype(dtype).kind == "f":
        return base64.standard_b64encode(struct.pack("<d", float(value))).decode()
    return value


def decode(value, dtype: np.dtype):
    """The fill value an attribute written by :func:`encode` (or a plain number, or Zarr's names of the
    non-finite ones, ``"NaN"``, which JSON attributes hold) stands for."""
    if np.dtype(dtype).kind == "f" and isinstance(value, str):
        if value in ZARR_FLOAT_NAMES:
            return ZARR_FLOAT_NAMES[value]
        return struct.unpack("<d", base64.standard_b64decode(value))[0]
    return value
