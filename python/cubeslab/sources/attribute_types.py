"""The numeric types of a source's attributes, which a Zarr store's JSON attributes lose (an int8 array is a
list of numbers, a float32 a float64): a NetCDF ingest records each one's numpy type in the group's
``cubeslab.attribute_types``, and HDF5 and NetCDF exports write the attributes back with them.

Without a record (a store from another source), CF's rules give the types they fix: ``valid_min``,
``valid_max``, ``valid_range``, ``_FillValue``, ``missing_value``, ``flag_values`` and ``flag_masks``
hold values of the variable's stored type, ``actual_range`` of the unpacked one (``scale_factor``'s);
other numbers keep the type JSON gives them, and numeric lists become arrays."""

from __future__ import annotations

import json

import numpy as np

from ..array import ZARR_FLOAT_NAMES
from . import fill_attribute

RECORD = "attribute_types"
"""The key, in the group's ``cubeslab`` attribute, of ``{array name: {attribute: numpy type}}``."""

GROUP = "/"
"""The record's key for the group's own attributes (a NetCDF file's global ones): no array is so named."""

# CF: these hold values of the variable's stored (packed) type.
STORED_TYPE = frozenset(
    {"valid_min", "valid_max", "valid_range", "_FillValue", "missing_value", "flag_values", "flag_masks"}
)
# CF: the unpacked values' type, which scale_factor or add_offset gives when the variable is packed.
UNPACKED_TYPE = frozenset({"actual_range"})
PACKING = ("scale_factor", "add_offset")


def numpy_types(attributes: dict) -> dict[str, str]:
    """The numpy type of each numeric attribute (a number or an array of them) as the source holds it."""
    types = {}
    for name, value in attributes.items():
        if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "biuf":
            types[name] = value.dtype.newbyteorder("=").name
    return types


def _cast(value, dtype: np.dtype):
    """``value`` (a JSON number or list of them) as ``dtype``, or None where it is not numbers or they do
    not fit: an integer out of range or with a fraction, a finite float that would become infinite."""
    values = value if isinstance(value, list) else [value]
    numbers = [ZARR_FLOAT_NAMES.get(v, v) if isinstance(v, str) else v for v in values]
    if not all(isinstance(v, (int, float)) for v in numbers):
        return None
    try:
        with np.errstate(over="ignore"):
            cast = np.array(numbers, dtype=object).astype(dtype)
    except (OverflowError, ValueError):
        return None
    wanted = np.array(numbers, dtype=np.float64)
    if dtype.kind == "f":
        fits = np.array_equal(np.isfinite(cast), np.isfinite(wanted))
    else:
        fits = all(int(c) == v for c, v in zip(cast.tolist(), numbers, strict=True))
    if not fits:
        return None
    return cast if isinstance(value, list) else cast[0]


def _default(value):
    """A value without a type to restore: numbers as they are, numeric and text lists as arrays, other
    nested values as JSON text."""
    if not isinstance(value, list):
        return value if isinstance(value, (bool, int, float, str)) else json.dumps(value)
    if value and all(isinstance(v, str) for v in value):
        return value
    if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return np.array(value)
    return json.dumps(value)


def _cf_type(name: str, attributes: dict, dtype: np.dtype, recorded: dict[str, str]) -> np.dtype | None:
    """The type CF fixes for attribute ``name`` of a variable of ``dtype``, if it fixes one."""
    if name in STORED_TYPE:
        return dtype
    if name in UNPACKED_TYPE:
        packing = [p for p in PACKING if p in attributes]
        if not packing:
            return dtype
        return np.dtype(recorded[packing[0]]) if packing[0] in recorded else np.dtype(np.float64)
    return None


def typed(attributes: dict, dtype, recorded: dict[str, str] | None = None) -> dict:
    """The store's JSON ``attributes`` of an array of ``dtype`` as HDF5 and NetCDF should hold them: each
    with its ``recorded`` type, else the type CF fixes, else :func:`_default`'s. None and cubeslab's own
    entry are left out; ``_FillValue`` is decoded from its stored form."""
    dtype, recorded = np.dtype(dtype), recorded or {}
    out = {}
    for name, value in attributes.items():
        if value is None or name == "cubeslab":
            continue
        if name == "_FillValue":
            value = fill_attribute.decode(value, dtype)
        wanted = recorded.get(name)
        kind = np.dtype(wanted) if wanted else _cf_type(name, attributes, dtype, recorded)
        cast = _cast(value, kind) if kind is not None else None
        out[name] = cast if cast is not None else _default(value)
    return out


def group_record(attributes: dict) -> dict[str, dict[str, str]]:
    """The record of a store group's ``attributes`` (empty for a store that has none)."""
    ours = attributes.get("cubeslab")
    record = ours.get(RECORD) if isinstance(ours, dict) else None
    return record if isinstance(record, dict) else {}
