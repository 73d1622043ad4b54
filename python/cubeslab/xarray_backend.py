"""An xarray backend, ``engine="cubeslab"``: a survey store as a lazy ``xarray.Dataset`` read by
cubeslab's engine.

::

    ds = xr.open_dataset("survey.zarr", engine="cubeslab")              # lazy, no dask
    ds = xr.open_dataset("survey.zarr", engine="cubeslab", chunks={})   # dask, one chunk per shard

Compared with xarray's own Zarr engine on the same store, it

- gives shard-sized dask chunks for ``chunks={}`` (``encoding["preferred_chunks"]`` is the shard
  shape; the Zarr engine advertises the small inner chunks, which makes tens of thousands of
  tasks);
- decodes every codec the engine writes, zarrs' ``zfp`` included, which zarr-python cannot;
- reads through the engine: parallel, checksummed, routed to the orientation copy (``--views``)
  predicted fastest.

Like the Zarr engine it decodes CF (``scale_factor``/``add_offset``, ``_FillValue``, times) unless told
not to (``decode_cf=False``, ``mask_and_scale=False``, ...), so a NetCDF ingest reads as the file did (but for
float32 packing, which decodes to float64 as from xarray's Zarr engine: docs/formats.md).

The Dataset holds ``amplitude`` and ``trace_mask`` as data variables and the survey coordinates:
``inline``, ``crossline``, ``offset`` (pre-stack), ``time`` or ``depth`` (with ``units``), and
``cdp_x`` / ``cdp_y`` over the trace dimensions. Trace headers stay with :class:`cubeslab.Cube`.

It opens MDIO v1 stores as well when asked by name (``engine="cubeslab"``; xarray's Zarr engine fails
on them: zarr-python has no ``struct`` data type for MDIO's trace headers), but only claims a store on
its own (``xr.open_dataset(path)`` without ``engine``) when cubeslab wrote it: a Zarr v3 group whose
attributes hold ``cubeslab``. xarray asks the ``cubeslab`` engine before the ``zarr`` one.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from . import schema
from .array import Array
from .cube import Cube, read_node
from .labels import is_text_node
from .opener import open as open_cube
from .sources import attribute_types, fill_attribute

# Variables over the trace dimensions, besides the amplitudes: the first is data, the rest coordinates.
TRACE_VARIABLES = (schema.TRACE_MASK, schema.CDP_X, schema.CDP_Y)
TRACE_COORDINATES = (schema.CDP_X, schema.CDP_Y)
# Attributes that describe the Zarr encoding, not the values (xarray's Zarr engine moves them out too).
ENCODING_ATTRIBUTES = ("coordinates",)
# CF decoding (masking and scaling, times), as xarray's own engines take it; by default each is on.
DECODERS = (
    "mask_and_scale",
    "decode_times",
    "decode_timedelta",
    "use_cftime",
    "concat_characters",
    "decode_coords",
)


def _cf_attributes(attributes: dict, dtype, recorded: dict[str, str] | None = None) -> dict:
    """Attributes as CF decoding reads them: the encoding's own and cubeslab's bookkeeping left out (a
    NetCDF file holds no nested values), ``_FillValue`` as a number
    (a NetCDF ingest stores it as xarray's Zarr engine does, base64 text for floats), and ``scale_factor``
    and ``add_offset`` of the type the source ``recorded`` (float32 packing decodes to float32, as
    xarray decodes the NetCDF file, not to the float64 a JSON number gives)."""
    kept = {
        k: v
        for k, v in attributes.items()
        if k not in ENCODING_ATTRIBUTES and not schema.is_bookkeeping(k, v)
    }
    if "_FillValue" in kept:
        kept["_FillValue"] = fill_attribute.decode(kept["_FillValue"], dtype)
    for name in attribute_types.PACKING:
        kind = (recorded or {}).get(name)
        if name in kept and kind is not None and isinstance(kept[name], (int, float)):
            kept[name] = np.dtype(kind).type(kept[name])
    return kept


class CubeslabBackendArray(BackendArray):
    """One array of a store, read by the engine when xarray asks for values (thread-safe: dask
    calls it from several threads at once; each call is one engine read)."""

    def __init__(self, array: Array):
        self.array = array
        self.shape = array.shape
        self.dtype = array.dtype

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        # OUTER_1VECTOR: xarray hands over integers, positive-step slices and at most one sorted,
        # duplicate-free array of positions; it does the rest of any selection on the result.
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER_1VECTOR, self._read
        )

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        # the engine's reads release the GIL: a worker thread each (Dataset.load_async)
        return await asyncio.to_thread(self.__getitem__, key)

    def _read(self, key: tuple) -> np.ndarray:
        window = list(key)
        vector, positions = None, np.empty(0, dtype=np.int64)
        for axis, k in enumerate(key):
            if isinstance(k, np.ndarray):
                positions = k.astype(np.int64)
                steps = np.diff(positions)
                if positions.size == 1 or bool((steps == steps[0]).all()):  # evenly spaced: one read
                    step = int(steps[0]) if steps.size else 1
                    window[axis] = slice(int(positions[0]), int(positions[-1]) + 1, step)
                else:
                    vector = axis
        if vector is None:
            return self.array.read(tuple(window))
        kept = vector - sum(1 for k in key[:vector] if isinstance(k, (int, np.integer)))
        first, last = int(positions[0]), int(positions[-1])
        if last - first + 1 <= 2 * positions.size:  # close together: read the span once, then pick
            window[vector] = slice(first, last + 1)
            return np.take(self.array.read(tuple(window)), positions - first, axis=kept)
        # spread out: one plane at a time, into one buffer whose first axis runs over them
        plane_shape = [
            len(range(*k.indices(n)))
            for axis, (k, n) in enumerate(zip(window, self.shape, strict=True))
            if axis != vector and isinstance(k, slice)
        ]
        out = np.empty((positions.size, *plane_shape), dtype=self.dtype)
        for row, position in zip(out, positions, strict=True):
            window[vector] = int(position)
            self.array.read(tuple(window), out=row)
        return np.moveaxis(out, 0, kept)


def _variable(
    array: Array, dims: Iterable[str], attrs: dict | None = None, recorded: dict[str, str] | None = None
) -> xr.Variable:
    """A lazy variable over ``array``, whose encoding advertises the shard shape to xarray; ``recorded``:
    its attributes' types, as the ingest recorded them."""
    dims = tuple(dims)
    preferred = array.shards or array.chunks
    encoding = {
        "chunks": array.chunks,
        "shards": array.shards,
        "preferred_chunks": dict(zip(dims, preferred, strict=True)),
        "dtype": array.dtype,
    }
    attributes = _cf_attributes(attrs or array.attributes, array.dtype, recorded)
    data = indexing.LazilyIndexedArray(CubeslabBackendArray(array))
    return xr.Variable(dims, data, attrs=attributes, encoding=encoding)


def vertical_units(cube: Cube, attributes: dict) -> str | None:
    """Units of the sample axis: as the store records them (``units``, or MDIO's ``unitsV1``), else
    by its name: ``time`` in ms (SEG-Y's sample interval is in µs; the axis is in ms), ``depth``
    in m, or ft when the binary header's measurement system says feet (code 2)."""
    if isinstance(attributes.get("units"), str):
        return attributes["units"]
    recorded = attributes.get("unitsV1")
    if isinstance(recorded, dict) and len(recorded) == 1:
        (unit,) = recorded.values()
        if isinstance(unit, str):
            return unit
    if cube.vertical == "time":
        return "ms"
    if cube.vertical == "depth":
        return "ft" if cube.binary_header.get("measurement_system_code") == 2 else "m"
    return None


def _with_units(attributes: dict) -> dict:
    """``attributes`` with CF's ``units`` beside MDIO's ``unitsV1`` (``{"length": "m"}``)."""
    recorded = attributes.get("unitsV1")
    if "units" not in attributes and isinstance(recorded, dict) and len(recorded) == 1:
        (unit,) = recorded.values()
        if isinstance(unit, str):
            return {**attributes, "units": unit}
    return attributes


def _listed_coordinates(cube: Cube, skipped: set[str]) -> dict[str, xr.Variable]:
    """The arrays the main array's ``coordinates`` attribute lists (CF's auxiliary and scalar coordinates,
    a curvilinear grid's lat and lon), over its dimensions, as xarray's engines give them."""
    found = {}
    for other in str(cube.amplitude.attributes.get("coordinates", "")).split():
        if other in skipped or not cube.has_coordinate_array(other):
            continue
        node = read_node(cube.path / other)
        dims = [str(d) for d in node.get("dimension_names") or []]
        shape = node.get("shape", [])
        if len(dims) != len(shape) or not set(dims) <= set(cube.dims):
            continue  # over dimensions the main array has not: not its coordinate
        attributes = _with_units(node.get("attributes", {}))
        if is_text_node(node):
            found[other] = xr.Variable(dims, cube.stored_values(other), attrs=_cf_attributes(attributes, str))
        else:
            recorded = attribute_types.group_record(cube.attributes).get(other)
            found[other] = _variable(cube._array(other), dims, attributes, recorded)
    return found


def survey_dataset(cube: Cube, drop_variables: Iterable[str] = ()) -> xr.Dataset:
    """The survey in ``cube`` as a lazy Dataset (nothing but metadata and 1-D coordinates read)."""
    dropped = set(drop_variables)
    is_group = cube.amplitude.path != os.fspath(cube.path)
    coords: dict[str, Any] = {}
    name = Path(cube.amplitude.path).name if is_group else schema.AMPLITUDE
    for dim in cube.dims:
        if dim in dropped or dim == name:
            continue  # a main array named like its dimension (NetCDF's x(y, x)) leaves that one unlabelled
        if not cube.has_coordinate_array(dim):
            continue  # no coordinate stored: a dimension without one, as xarray's own engines give it
        recorded = attribute_types.group_record(cube.attributes).get(
            dim
        )  # packed coordinates decode as data do
        attributes = _cf_attributes(cube.stored_attributes(dim), cube.coords[dim].dtype, recorded)
        if dim == cube.vertical:
            units = vertical_units(cube, attributes)
            if units is not None:
                attributes = {**attributes, "units": units}
        coords[dim] = xr.Variable((dim,), cube.coords[dim], attrs=_with_units(attributes))
    data_vars: dict[str, xr.Variable] = {}
    if name not in dropped:
        data_vars[name] = _variable(
            cube.amplitude, cube.dims, None, attribute_types.group_record(cube.attributes).get(name)
        )
    for variable in TRACE_VARIABLES if is_group else ():
        if variable in dropped or not (cube.path / variable / "zarr.json").is_file():
            continue
        array = cube._array(variable)
        dims = array.dimension_names or cube.dims[: array.ndim]
        values = _variable(array, dims, _with_units(array.attributes))
        (coords if variable in TRACE_COORDINATES else data_vars)[variable] = values
    if is_group:
        coords |= _listed_coordinates(cube, set(coords) | set(data_vars) | dropped | {name})
    attributes = {k: v for k, v in cube.attributes.items() if not schema.is_bookkeeping(k, v)}
    return xr.Dataset(data_vars, coords=coords, attrs=attributes)


def _is_cubeslab_store(path: str | os.PathLike) -> bool:
    """A store cubeslab wrote: a Zarr v3 group whose attributes hold a ``cubeslab`` entry."""
    try:
        node = json.loads((Path(path) / "zarr.json").read_bytes())
    except (OSError, ValueError):
        return False
    return (
        isinstance(node, dict)
        and node.get("node_type") == "group"
        and isinstance(node.get("attributes"), dict)
        and "cubeslab" in node["attributes"]
    )


class CubeslabBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(store, engine="cubeslab", chunks={})``: see :mod:`cubeslab.xarray_backend`.

    Options (keywords of ``open_dataset``): ``drop_variables``; ``threads``, ``in_flight`` and
    ``verify`` as :func:`cubeslab.open` takes them. ``filename_or_obj`` may also be an open
    :class:`cubeslab.Cube` (which :meth:`cubeslab.Cube.to_xarray` passes; it stays open).
    """

    description = "cubeslab survey stores (Zarr v3, any codec cubeslab writes) read by cubeslab's engine"
    open_dataset_parameters = (
        "filename_or_obj",
        "drop_variables",
        "threads",
        "in_flight",
        "verify",
        *DECODERS,
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if isinstance(filename_or_obj, Cube):
            return True
        if isinstance(filename_or_obj, (str, os.PathLike)):
            return _is_cubeslab_store(filename_or_obj)
        return False

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        threads: int | None = None,
        in_flight: int | None = None,
        verify: bool = True,
        **decoders,
    ) -> xr.Dataset:
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        if isinstance(filename_or_obj, Cube):
            cube, owned = filename_or_obj, False
        else:
            cube = open_cube(filename_or_obj, threads=threads, in_flight=in_flight, verify=verify)
            owned = True
        # Decoded as xarray's engines decode: a NetCDF ingest's packed values and times come out as
        # xarray.open_dataset gives them from the file.
        chosen = {k: v for k, v in decoders.items() if k in DECODERS and v is not None}
        dataset = xr.decode_cf(survey_dataset(cube, drop_variables or ()), **chosen)
        dataset.encoding["source"] = os.fspath(cube.path)
        dataset.set_close(cube.close if owned else None)
        return dataset
