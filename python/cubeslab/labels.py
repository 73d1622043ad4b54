"""Text labels: coordinate values that are words, not numbers (a NetCDF variable of region names, an
xarray index of station names), stored as Zarr v3 ``string`` arrays, which zarr-python and xarray read.
Stores written by xarray may hold them as zarr-python's ``fixed_length_utf32``; both are read."""

from __future__ import annotations

import json
import os

import numpy as np

from . import _engine
from .array import Array, zarr_json
from .locations import S3Path, storage_options_of


def is_text(values) -> bool:
    """Whether values are text labels."""
    return np.asarray(values).dtype.kind in "US"


def is_text_node(node: dict) -> bool:
    """Whether an array's ``zarr.json`` document describes text labels."""
    return _engine.is_text_array(json.dumps(node))


def read_labels(path: str | os.PathLike | S3Path) -> np.ndarray:
    """A text array's values (a folder, or an :class:`S3Path` on object storage), as numpy ``str``."""
    shape, values = _engine.read_text_array(os.fspath(path), storage_options_of(path))
    return np.array(values, dtype=str).reshape(shape)


def write_values(
    path: str | os.PathLike, values: np.ndarray, dimension_names: list[str], attributes: dict | None = None
) -> None:
    """Write a coordinate (or other small) array whole, in one chunk: text labels as a ``string`` array,
    numbers as the engine's arrays."""
    values = np.asarray(values)
    if is_text(values):
        text = values.astype(str) if values.dtype.kind == "U" else np.char.decode(values, "utf-8")
        _engine.write_text_array(
            os.fspath(path), list(values.shape), text.reshape(-1).tolist(), dimension_names,
            zarr_json(attributes or {}),
        )  # fmt: skip
        return
    values = values.astype(values.dtype.newbyteorder("="))
    Array.from_numpy(
        path, values, chunks=values.shape, dimension_names=dimension_names, attributes=attributes
    )
