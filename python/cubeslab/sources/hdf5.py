"""HDF5 datasets, read with h5py (the ``hdf5`` extra), slab by slab: chunked or contiguous, any numeric
type in either byte order. The dataset's attributes are kept, and its dimension scales name the store's
axes (with origin and step where evenly spaced)."""

from __future__ import annotations

import os

import numpy as np

from ..errors import InvalidInputError
from .raw import ArraySource

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def _h5py():
    try:
        import h5py
    except ImportError:
        raise InvalidInputError("reading HDF5 needs h5py: pip install 'cubeslab[hdf5]' (or h5py)") from None
    return h5py


def _json_value(value):
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, np.ndarray):
        return (
            [_json_value(v) for v in value.tolist()]
            if value.dtype.kind != "S"
            else [v.decode(errors="replace") for v in value.tolist()]
        )
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, (bool, int, float, str, list)) else str(value)


def _datasets(h5py, group) -> list[str]:
    found: list[str] = []
    group.visititems(lambda name, obj: found.append("/" + name) if isinstance(obj, h5py.Dataset) else None)
    return found


def describe_hdf5(path: str | os.PathLike) -> dict:
    """What ``cubeslab info`` shows of an HDF5 file: every dataset's type and shape, and which are
    dimension scales."""
    h5py = _h5py()
    try:
        f = h5py.File(path, "r")
    except OSError as error:
        raise InvalidInputError(f"{path}: not an HDF5 file h5py reads: {error}") from None
    with f:
        datasets = {}
        for name in _datasets(h5py, f):
            d = f[name]
            scale = " (dimension scale)" if d.attrs.get("CLASS") == b"DIMENSION_SCALE" else ""
            datasets[name] = f"{d.dtype} {list(d.shape)}{scale}"
        return {"file": os.fspath(path), "format": "hdf5", "datasets": datasets}


def hdf5_source(path: str | os.PathLike, dataset: str | None = None) -> ArraySource:
    h5py = _h5py()
    try:
        f = h5py.File(path, "r")
    except OSError as error:
        raise InvalidInputError(f"{path}: not an HDF5 file h5py reads: {error}") from None
    names = _datasets(h5py, f)
    scales = {n for n in names if f[n].attrs.get("CLASS") == b"DIMENSION_SCALE"}
    if dataset is None:
        candidates = [n for n in names if n not in scales and f[n].ndim >= 1 and f[n].dtype.kind in "biuf"]
        if len(candidates) != 1:
            listed = ", ".join(f"{n} {f[n].shape} {f[n].dtype}" for n in names) or "none"
            raise InvalidInputError(
                f"{path}: {'no' if not candidates else 'more than one'} N-D numeric dataset; choose one with "
                f"--dataset (the datasets: {listed})"
            )
        dataset = candidates[0]
    if dataset not in f or not isinstance(f[dataset], h5py.Dataset):
        raise InvalidInputError(f"{path}: no dataset {dataset}; the datasets: {', '.join(names) or 'none'}")
    data = f[dataset]
    if data.dtype.kind not in "biuf":
        raise InvalidInputError(f"{path}: dataset {dataset} holds {data.dtype}, not numbers cubeslab stores")
    if data.ndim == 0:
        raise InvalidInputError(f"{path}: dataset {dataset} is a scalar; cubeslab stores 1 to 8 dimensions")
    if data.is_virtual:
        raise InvalidInputError(f"{path}: dataset {dataset} is virtual (its data lies in other files)")
    if data.external:
        raise InvalidInputError(f"{path}: dataset {dataset} keeps its data in external files {data.external}")
    axes = []
    for d, dim in enumerate(data.dims):
        axis = {"name": dim.label or f"dim_{d}", "origin": 0.0, "step": 1.0, "unit": None}
        if len(dim):
            scale = dim[0]
            axis["name"] = dim.label or scale.name.rsplit("/", 1)[-1]
            values = np.asarray(scale[...], dtype=np.float64)
            steps = np.diff(values)
            if values.size and (steps.size == 0 or np.allclose(steps, steps[0], rtol=1e-9, atol=0)):
                axis["origin"], axis["step"] = float(values[0]), float(steps[0]) if steps.size else 1.0
            unit = scale.attrs.get("units")
            axis["unit"] = _json_value(unit) if unit is not None else None
        axes.append(axis)
    skip = {"DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME"}
    attributes = {k: _json_value(v) for k, v in data.attrs.items() if k not in skip}
    return ArraySource(
        os.fspath(path), data, "hdf5", axes, attributes={"hdf5_dataset": dataset, **attributes}
    )
