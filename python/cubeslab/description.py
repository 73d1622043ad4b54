"""A store as a JSON description (the SEP buffers library's hypercube description): its axes (name,
size, origin, step, unit), element type, layout, codec, fill value and attributes. ``describe`` gives
it for any store; ``create(path, description=...)`` makes an empty store from one, so that describe,
create and describe again give the same description."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from . import _engine
from .errors import InvalidInputError

AXES_ATTR = "axes"
"""Where, inside an array's ``cubeslab`` attributes, a created store keeps its axes' origin, step and unit."""

FIELDS = ("axes", "dtype", "chunks", "shards", "compress", "fill_value", "attributes")
AXIS_FIELDS = ("name", "size", "origin", "step", "unit")


def _regular_axis(values: np.ndarray) -> tuple[float, float] | None:
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
        elif cube.attributes:  # a survey: its coordinate arrays, where evenly spaced
            regular = _regular_axis(cube.coords[name])
            if regular is not None:
                axis["origin"], axis["step"] = regular
            coordinate = Path(cube.path, name)
            if (coordinate / "zarr.json").is_file():
                attributes = cube._array(name).attributes
                unit = attributes.get("unitsV1") or attributes.get("units")
                axis["unit"] = next(iter(unit.values())) if isinstance(unit, dict) and unit else unit
        axes.append(axis)
    codecs = array.metadata.get("codecs", [])
    if array.shards is not None:
        codecs = codecs[0].get("configuration", {}).get("codecs", [])
    attributes = {k: v for k, v in array.attributes.items() if k != "cubeslab"}
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
    axes = [
        {"origin": float(a.get("origin", 0.0)), "step": float(a.get("step", 1.0)), "unit": a.get("unit")}
        for a in d["axes"]
    ]
    fill = d.get("fill_value")
    return {
        "shape": [a["size"] for a in d["axes"]],
        "dtype": d["dtype"],
        "dims": [a["name"] for a in d["axes"]],
        "chunks": d.get("chunks"),
        "shards": d.get("shards"),
        "compress": d.get("compress"),
        "fill_value": float(fill.replace("Infinity", "inf")) if isinstance(fill, str) else fill,
        "attributes": {**d["attributes"], "cubeslab": {AXES_ATTR: axes}},
    }


__all__ = ["checked", "create_arguments", "describe"]
