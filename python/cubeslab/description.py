"""A store as a JSON description (the SEP buffers library's hypercube description): its axes (name,
size, origin, step, unit), element type, layout, codec, fill value and attributes. ``describe`` gives
it for any store; ``create(path, description=...)`` makes an empty store from one, so that describe,
create and describe again give the same description."""

from __future__ import annotations

import json
import math
import os

import numpy as np

from . import _engine, schema
from .array import ZARR_FLOAT_NAMES, zarr_fill_value
from .errors import InvalidInputError

AXES_ATTR = "axes"
"""Where, inside an array's ``cubeslab`` attributes, a created store keeps its axes' origin, step and unit."""

FIELDS = ("axes", "dtype", "chunks", "shards", "compress", "fill_value", "attributes")
AXIS_FIELDS = ("name", "size", "origin", "step", "unit", "values")
"""An unevenly spaced axis gives its coordinates as ``values``, its origin and step null; a value that is
not finite by its Zarr name (``"NaN"``, ``"Infinity"``), as the fill value and attributes are, since JSON
has no such numbers."""

DATA_ATTRIBUTES = frozenset({schema.STATS_V1, "coordinates"})
"""Attributes that describe the data (MDIO's statistics) or name arrays beside it (CF's auxiliary
coordinates): a description carries neither, so an empty store made from it does not claim them."""


def regular_axis(values: np.ndarray) -> tuple[float, float] | None:
    """(origin, step) of evenly spaced coordinate values; None otherwise."""
    if values.size == 0 or values.dtype.kind not in "iuf":
        return None
    if values.size == 1:
        return float(values[0]), 1.0
    steps = np.diff(values.astype(np.float64))
    if not np.allclose(steps, steps[0], rtol=1e-9, atol=0):
        return None
    return float(values[0]), float(steps[0])


def describe(path: str | os.PathLike) -> dict:
    """The description of the store at ``path`` (see the module's docstring)."""
    from .cube import Cube

    cube = Cube(path)
    array = cube.amplitude
    recorded = array.attributes.get("cubeslab", {}).get(AXES_ATTR)
    axes = []
    for d, (name, size) in enumerate(zip(cube.dims, cube.shape, strict=True)):
        axis = {"name": name, "size": size, "origin": 0.0, "step": 1.0, "unit": None}
        if recorded is not None:
            axis.update({k: recorded[d][k] for k in ("origin", "step", "unit")})
        elif cube.attributes or cube.has_coordinate_array(name):  # its coordinates, where evenly spaced
            axis["origin"], axis["step"] = regular_axis(cube.coords[name]) or (None, None)
            if cube.has_coordinate_array(name):
                attributes = cube.stored_attributes(name)
                unit = attributes.get("unitsV1") or attributes.get("units")
                axis["unit"] = next(iter(unit.values())) if isinstance(unit, dict) and unit else unit
        if axis["origin"] is None:  # unevenly spaced: the coordinates themselves
            axis["values"] = [zarr_fill_value(v) for v in cube.coords[name].tolist()]
        axes.append(axis)
    codecs = array.metadata.get("codecs", [])
    if array.shards is not None:
        codecs = codecs[0].get("configuration", {}).get("codecs", [])
    attributes = {k: v for k, v in array.attributes.items() if k != "cubeslab" and k not in DATA_ATTRIBUTES}
    return {
        "axes": axes,
        "dtype": str(array.dtype),
        "chunks": list(array.chunks),
        "shards": list(array.shards) if array.shards is not None else None,
        "compress": _engine.compression_name(json.dumps(codecs)),
        "fill_value": array.metadata.get("fill_value"),
        "attributes": attributes,
    }


def _field(description: dict, name: str, kind, where: str = "description"):
    if name not in description:
        raise InvalidInputError(f"{where}: field {name!r} is missing")
    value = description[name]
    if not isinstance(value, kind):
        raise InvalidInputError(f"{where}: field {name!r} must be {kind_name(kind)}, not {value!r}")
    return value


def kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object"}
    return " or ".join(names.get(k, "null" if k is type(None) else k.__name__) for k in kinds)


def _sides(description: dict, name: str, ndim: int) -> list[int] | None:
    value = description.get(name)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != ndim
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
    ):
        raise InvalidInputError(
            f"description: {name!r} must list {ndim} positive integers, one per axis, not {value!r}"
        )
    return value


def is_numbers(values: list) -> bool:
    """Numbers, those that are not finite by their Zarr names (as ``describe`` writes them)."""
    return all(
        v in ZARR_FLOAT_NAMES
        if isinstance(v, str)
        else isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        for v in values
    )


def is_labels(values: list) -> bool:
    """Text labels: strings, not all of them Zarr's names of non-finite numbers."""
    return all(isinstance(v, str) for v in values) and not is_numbers(values)


def _check_values(axis: dict, size: int, where: str) -> None:
    """An unevenly spaced axis: ``size`` finite numbers (or text labels), and no origin or step beside
    them."""
    values = axis["values"]
    if not isinstance(values, list) or len(values) != size or not (is_numbers(values) or is_labels(values)):
        raise InvalidInputError(
            f"{where}: 'values' must list {size} numbers (finite, or named as Zarr names them: "
            f"{', '.join(map(repr, ZARR_FLOAT_NAMES))}), or {size} text labels, one per position"
        )
    if axis.get("origin") is not None or axis.get("step") is not None:
        raise InvalidInputError(f"{where}: give 'values' or 'origin' and 'step', not both")


def checked(description) -> dict:
    """The description, every field checked: a missing or contradictory one is an InvalidInputError
    naming it."""
    if not isinstance(description, dict):
        raise InvalidInputError(f"a description is a JSON object, not {type(description).__name__}")
    unknown = sorted(set(description) - set(FIELDS))
    if unknown:
        raise InvalidInputError(
            f"description: unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)}"
        )
    axes = _field(description, "axes", list)
    if not axes:
        raise InvalidInputError("description: 'axes' lists no axis")
    for i, axis in enumerate(axes):
        where = f"description: axes[{i}]"
        if not isinstance(axis, dict):
            raise InvalidInputError(f"{where} must be an object with {', '.join(AXIS_FIELDS)}")
        extra = sorted(set(axis) - set(AXIS_FIELDS))
        if extra:
            raise InvalidInputError(f"{where}: unknown field {extra[0]!r}")
        _field(axis, "name", str, where)
        size = _field(axis, "size", int, where)
        if size <= 0 or isinstance(size, bool):
            raise InvalidInputError(f"{where}: 'size' must be a positive integer, not {size!r}")
        if axis.get("values") is not None:
            _check_values(axis, size, where)
        else:
            for key in ("origin", "step"):
                value = axis.get(key, 0.0 if key == "origin" else 1.0)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise InvalidInputError(f"{where}: {key!r} must be a finite number, not {value!r}")
            if axis.get("step", 1.0) == 0:
                raise InvalidInputError(f"{where}: 'step' cannot be 0")
        if axis.get("unit") is not None and not isinstance(axis["unit"], str):
            raise InvalidInputError(f"{where}: 'unit' must be a string or null")
    names = [a["name"] for a in axes]
    if len(set(names)) != len(names):
        raise InvalidInputError(f"description: axis names repeat: {names}")
    try:
        dtype = np.dtype(_field(description, "dtype", str))
    except TypeError:
        raise InvalidInputError(
            f"description: 'dtype' {description['dtype']!r} is not a numpy type"
        ) from None
    chunks = _sides(description, "chunks", len(axes))
    shards = _sides(description, "shards", len(axes))
    if shards is not None and chunks is None:
        raise InvalidInputError("description: 'shards' needs 'chunks' (the chunks inside each shard)")
    if shards is not None and chunks is not None and any(s % c for s, c in zip(shards, chunks, strict=True)):
        raise InvalidInputError(
            f"description: every shard side must be a multiple of the chunk's: {shards} and {chunks}"
        )
    compress = description.get("compress")
    if compress is not None and not isinstance(compress, str):
        raise InvalidInputError(
            f"description: 'compress' must be a --compress name or null, not {compress!r}"
        )
    attributes = description.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise InvalidInputError("description: 'attributes' must be an object")
    if "cubeslab" in attributes:
        raise InvalidInputError("description: attribute 'cubeslab' is cubeslab's own; name yours otherwise")
    return {**description, "dtype": dtype.name, "attributes": attributes}


def create_arguments(description) -> dict:
    """The arguments of :func:`cubeslab.create` that make an empty store from ``description``."""
    d = checked(description)
    axes, coords = [], {}
    for a in d["axes"]:
        if a.get("values") is not None:
            axes.append({"origin": None, "step": None, "unit": a.get("unit")})
            values = a["values"]
            if is_labels(values):
                coords[a["name"]] = np.array(values, dtype=str)
            else:
                numbers = [ZARR_FLOAT_NAMES[v] if isinstance(v, str) else v for v in values]
                coords[a["name"]] = np.array(numbers, np.float64)
            continue
        origin, step = float(a.get("origin", 0.0)), float(a.get("step", 1.0))
        axes.append({"origin": origin, "step": step, "unit": a.get("unit")})
        # An axis with a scale becomes a coordinate array, as ingest makes one, so readers label it.
        if (origin, step) != (0.0, 1.0) or a.get("unit"):
            coords[a["name"]] = origin + step * np.arange(a["size"], dtype=np.float64)
    fill = d.get("fill_value")
    return {
        "shape": [a["size"] for a in d["axes"]],
        "dtype": d["dtype"],
        "dims": [a["name"] for a in d["axes"]],
        "coords": coords,
        "chunks": d.get("chunks"),
        "shards": d.get("shards"),
        "compress": d.get("compress"),
        "fill_value": fill,  # a Zarr name ("NaN") or bit pattern is checked as create checks any
        "attributes": {**d["attributes"], "cubeslab": {AXES_ATTR: axes}},
    }


__all__ = ["checked", "create_arguments", "describe"]
