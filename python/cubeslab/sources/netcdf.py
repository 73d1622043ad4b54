"""NetCDF variables (classic or NetCDF 4), read with netCDF4 (the ``netcdf`` extra). The store holds the
variable's raw values with their CF attributes (``scale_factor``, ``add_offset``, ``_FillValue``) and
the coordinate variables beside it, so that ``xarray.open_zarr(store)[name]`` decodes to what
``xarray.open_dataset(file)[name]`` gives; the file's global attributes become the group's."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np

from .. import _engine, defaults
from ..array import Array, zarr_json
from ..errors import IngestWarning, InvalidInputError
from ..hdf5_file import is_hdf5_file
from ..labels import write_values
from ..locations import publishing
from . import attribute_types, fill_attribute
from .hdf5 import in_place_reader
from .ingest import Progress, natural_access, planned, summary, write_in_slabs
from .raw import ArraySource, check_storable

NETCDF_CLASSIC_MAGICS = (b"CDF\x01", b"CDF\x02", b"CDF\x05")


def _netcdf4():
    try:
        import netCDF4
    except ImportError:
        raise InvalidInputError("reading NetCDF needs netCDF4: pip install 'cubeslab[netcdf]'") from None
    return netCDF4


def _value(value):
    if isinstance(value, np.ndarray):
        return [_value(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value


def _attributes(variable) -> dict:
    """The variable's attributes for the store, its ``_FillValue`` as xarray's Zarr engine reads it."""
    attributes = {name: _value(variable.getncattr(name)) for name in variable.ncattrs()}
    if "_FillValue" in attributes:
        attributes["_FillValue"] = fill_attribute.encode(attributes["_FillValue"], variable.dtype)
    return attributes


def _check_classic_size(path, dataset) -> None:
    """Refuse a classic file shorter than the data its header describes: netCDF-C reads past the end as
    zeros or as other variables' bytes, without an error."""
    if not dataset.data_model.startswith("NETCDF3"):
        return
    records = [d for d in dataset.dimensions.values() if d.isunlimited()]
    count = len(records[0]) if records else 0
    needed = 0
    for variable in dataset.variables.values():
        sizes = [
            len(dataset.dimensions[d]) for d in variable.dimensions if not dataset.dimensions[d].isunlimited()
        ]
        values = int(np.prod(sizes, dtype=np.int64)) * np.dtype(variable.dtype).itemsize
        recorded = any(dataset.dimensions[d].isunlimited() for d in variable.dimensions)
        needed += values * count if recorded else values
    size = os.path.getsize(path)
    if size < needed:
        shown = ", ".join(f"{d.name}={len(d)}" for d in dataset.dimensions.values())
        raise InvalidInputError(
            f"{path}: {size:,} bytes, but its header's dimensions ({shown}) describe {needed:,} bytes of "
            "variable data: the file is cut short or its header is wrong"
        )


def _numeric(variable) -> bool:
    """Whether a variable holds plain numbers (not text, variable-length, compound or enum values)."""
    return isinstance(variable.datatype, np.dtype) and variable.datatype.kind in "biuf"


def _is_characters(variable) -> bool:
    """Whether a variable holds text as characters along its last dimension (``char name(station,
    strlen)``, NetCDF classic's only text), which xarray joins into one label per position."""
    return (
        isinstance(variable.datatype, np.dtype) and variable.datatype == np.dtype("S1") and variable.ndim >= 1
    )


def _label_dimensions(variable) -> tuple[str, ...]:
    """A coordinate's dimensions as stored: a character array's without its length dimension."""
    return tuple(variable.dimensions[:-1] if _is_characters(variable) else variable.dimensions)


def _type_name(variable) -> str:
    kind = variable.datatype
    if isinstance(kind, np.dtype):
        return str(kind)
    return "text" if variable.dtype is str else f"{type(kind).__name__} {getattr(kind, 'name', '')}".strip()


def _variables(group, prefix: str = "") -> dict:
    """Every variable of ``group`` and its subgroups, by name with its groups (``grp/v``)."""
    found = {prefix + name: v for name, v in group.variables.items()}
    for name, child in group.groups.items():
        found |= _variables(child, f"{prefix}{name}/")
    return found


def _is_coordinate_variable(name: str, variable) -> bool:
    """Whether a variable is its dimension's coordinate variable: one dimension, of its own name (not
    ``x(y, x)``, which netCDF allows)."""
    return tuple(variable.dimensions) == (name,)


def _choose(path, dataset, variable: str | None) -> str:
    """The name (with its groups, ``grp/v``) of the variable to ingest: ``variable``, or the root group's
    only data variable (as xarray opens the root group), else the file's only one. Variables another one
    lists in its ``coordinates`` attribute (CF's auxiliary coordinates, such as a curvilinear grid's lat
    and lon) are coordinates, not data, as xarray takes them."""
    variables = _variables(dataset)
    if variable is None:
        auxiliary = {
            f"{name.rsplit('/', 1)[0]}/{c}" if "/" in name else c
            for name, v in variables.items()
            for c in str(v.__dict__.get("coordinates", "")).split()
        }
        data = [
            name for name, v in variables.items()
            if name not in auxiliary and not _is_coordinate_variable(v.name, v)
            and v.ndim >= 1 and _numeric(v)
        ]  # fmt: skip
        in_root = [name for name in data if "/" not in name]
        data = in_root if in_root else data
        if len(data) != 1:
            listed = ", ".join(f"{n} {variables[n].dimensions}" for n in data) or "none"
            raise InvalidInputError(
                f"{path}: {'no' if not data else 'more than one'} data variable; choose one with --variable "
                f"(the variables: {listed})"
            )
        return data[0]
    variable = variable.strip("/")
    if variable not in variables:
        raise InvalidInputError(f"{path}: no variable {variable}; the variables: {', '.join(variables)}")
    chosen = variables[variable]
    if not _numeric(chosen):
        raise InvalidInputError(
            f"{path}: variable {variable} holds {_type_name(chosen)} values, not numbers cubeslab stores"
        )
    return variable


def _visible(group, name: str):
    """The variable ``name`` as seen from ``group``: its own, else its nearest ancestor's (netCDF's scope
    of dimensions, and CF's search for coordinates), or None."""
    while group is not None:
        if name in group.variables:
            return group.variables[name]
        group = group.parent
    return None


def _coordinates(dataset, source) -> dict:
    """The variables to store beside ``source``, by name: its dimensions' coordinate variables, those its
    ``coordinates`` attribute lists, and those other variables list over its dimensions (scalar ones too)."""
    found = {}
    for dim in source.dimensions:
        c = _visible(source.group(), dim)
        if c is not None and _is_coordinate_variable(dim, c):
            found[dim] = c
    for name in str(source.__dict__.get("coordinates", "")).split():
        c = _visible(source.group(), name)
        if c is not None and name not in found:
            found[name] = c
    # A coordinate any variable lists is one of the whole dataset's, so xarray gives it to each variable
    # over its dimensions (a scalar one to all).
    for other in source.group().variables.values():
        for name in str(other.__dict__.get("coordinates", "")).split():
            c = _visible(source.group(), name)
            if c is not None and set(_label_dimensions(c)) <= set(source.dimensions) and name not in found:
                found[name] = c
    found.pop(source.name, None)  # a coordinate variable ingested is the store's main array
    return found


def _raw_attributes(node) -> dict:
    return {name: node.getncattr(name) for name in node.ncattrs()}


def describe_netcdf(path: str | os.PathLike) -> dict:
    """What ``cubeslab info`` shows of a NetCDF file: its variables and global attributes."""
    netCDF4 = _netcdf4()
    try:
        with netCDF4.Dataset(path) as dataset:
            return {
                "file": os.fspath(path),
                "format": f"netcdf ({dataset.data_model})",
                "variables": {
                    name: f"{v.dtype} {dict(zip(v.dimensions, v.shape, strict=True))}"
                    for name, v in _variables(dataset).items()
                },
                "attributes": {k: _value(dataset.getncattr(k)) for k in dataset.ncattrs()},
            }
    except OSError as error:
        raise InvalidInputError(f"{path}: not a NetCDF file netCDF4 reads: {error}") from None


SOURCE_VARIABLE = "netcdf_variable"
"""Where, in a store's ``cubeslab`` group attributes, an ingest records the variable it read (``grp/v``)."""


def _open_raw(path: str | os.PathLike):
    """The file, open to read its variables' values as stored (CF scaling and masking not applied)."""
    netCDF4 = _netcdf4()
    try:
        dataset = netCDF4.Dataset(path)
    except OSError as error:
        raise InvalidInputError(f"{path}: not a NetCDF file netCDF4 reads: {error}") from None
    dataset.set_auto_maskandscale(False)
    return dataset


def netcdf_source(path: str | os.PathLike, variable: str) -> ArraySource:
    """The variable ``variable`` (``grp/v``) of a NetCDF file, read as its ingest reads it: raw values,
    CF attributes not applied."""
    dataset = _open_raw(path)
    variables = _variables(dataset)
    if variable not in variables:
        raise InvalidInputError(
            f"{path}: no variable {variable}; the variables: {', '.join(variables) or 'none'}"
        )
    return ArraySource(os.fspath(path), variables[variable], "netcdf")


def _labels_of_characters(path, name: str, variable) -> np.ndarray:
    """A character array's labels, each its characters joined (decoded as its ``_Encoding`` says, UTF-8
    without one)."""
    encoding = str(variable.__dict__.get("_Encoding", "utf-8"))
    variable.set_auto_chartostring(False)  # netCDF4 joins them itself only where _Encoding is set
    joined = np.ascontiguousarray(variable[...]).view(f"S{variable.shape[-1]}")[..., 0]
    try:
        return np.vectorize(lambda b: b.decode(encoding), otypes=[str])(joined)
    except (UnicodeDecodeError, LookupError) as error:
        raise InvalidInputError(
            f"{path}: coordinate variable {name} is not {encoding} text: {error}"
        ) from None


def ingest_netcdf(
    path: str | os.PathLike,
    store: str | os.PathLike,
    *,
    variable: str | None = None,
    overwrite: bool = False,
    durable: bool = False,
    layout: str = defaults.LAYOUT,
    access: str | None = None,
    compress: str | None = None,
    memory_limit: int | None = None,
    progress: Progress | None = None,
) -> dict:
    """Write one variable of a NetCDF file, with its coordinates, into a new store."""
    dataset = _open_raw(path)
    chosen = _choose(path, dataset, variable)
    source = _variables(dataset)[chosen]
    name = source.name
    shape, dtype = tuple(source.shape), np.dtype(source.dtype).newbyteorder("=")
    check_storable(f"{path}: variable {chosen}", shape, dtype)
    _check_classic_size(path, dataset)
    listed = str(source.__dict__.get("coordinates", "")).split()
    coordinates = _coordinates(dataset, source)
    limit = int(memory_limit or defaults.MEMORY_LIMIT)
    chunking = source.chunking() if hasattr(source, "chunking") else "contiguous"
    access = access or natural_access(None if chunking == "contiguous" else chunking)
    chunks, shards = planned(shape, dtype, layout, access, compress, limit)
    global_attributes = _raw_attributes(dataset)
    # Zarr's JSON attributes lose their numbers' types; an export writes them back with these.
    stored = [(name, source), *coordinates.items()]
    types = {n: attribute_types.numpy_types(_raw_attributes(v)) for n, v in stored}
    types[attribute_types.GROUP] = attribute_types.numpy_types(global_attributes)
    with publishing(store, overwrite) as publication:
        staging = os.fspath(publication.staging)
        group_attributes = {k: _value(v) for k, v in global_attributes.items()}
        # The store's generation, in the group and the array, gives each shard its identity.
        generation = json.loads(_engine.new_generation_attributes())["cubeslab"]
        ours = {attribute_types.RECORD: types, SOURCE_VARIABLE: chosen, **generation}
        _engine.create_group(staging, name, zarr_json(group_attributes | {"cubeslab": ours}))
        attributes = _attributes(source) | {"cubeslab": generation}
        extra = [c for c in coordinates if c not in source.dimensions and c not in listed]
        if extra:
            # Listed on the variable, as xarray's own writer lists them, so that the store's readers see them.
            attributes["coordinates"] = " ".join(listed + extra)
        fill = source.__dict__.get("_FillValue")
        Array.create(
            os.path.join(staging, name), shape, dtype, chunks=chunks, shards=shards, compress=compress,
            dimension_names=list(source.dimensions), attributes=attributes, fill_value=fill,
        )  # fmt: skip
        # A NetCDF 4 variable is an HDF5 dataset: read in place by the engine, in parallel, where it can.
        in_place = in_place_reader(path, source.group().path.rstrip("/") + "/" + name, variable=True) if (
            is_hdf5_file(path)
        ) else None  # fmt: skip
        read = in_place or (lambda start, stop: source[start:stop])
        with Array(os.path.join(staging, name), cache=max(limit // 2, 1)) as out:
            write_in_slabs(
                out, lambda start, stop: np.asarray(read(start, stop), dtype=dtype), shards, limit, progress
            )
        for coordinate, c in coordinates.items():
            where = os.path.join(staging, coordinate)
            if _numeric(c) or c.dtype is str:  # numbers, or NetCDF 4 strings (labels)
                values = np.asarray(c[...])
                values = values.astype(str) if c.dtype is str else values
                write_values(where, values, list(c.dimensions), _attributes(c))
            elif _is_characters(c):  # labels as characters: joined, as xarray joins them
                labels = _labels_of_characters(path, coordinate, c)
                attributes = {k: v for k, v in _attributes(c).items() if k != "_Encoding"}
                write_values(where, labels, list(_label_dimensions(c)), attributes)
            else:
                warnings.warn(
                    IngestWarning(
                        f"{path}: coordinate variable {coordinate} ({_type_name(c)}) is not stored; cubeslab "
                        "stores numbers and NetCDF 4 strings"
                    ),
                    stacklevel=2,
                )
        dataset.close()
        _engine.mark_complete(staging)
        report = summary(os.fspath(path), store, shape, dtype, chunks, shards, layout, access, staging)
        publication.commit(durable)
        return report | {"variable": chosen}
