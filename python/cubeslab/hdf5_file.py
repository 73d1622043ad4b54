"""An HDF5 file's datasets through h5py (the ``hdf5`` extra): find the one asked for, and its axes and
attributes as cubeslab keeps them. Shared by HDF5 ingest and by datasets read in place."""

from __future__ import annotations

import contextlib
import itertools
import os
import posixpath
import warnings

import numpy as np

from . import _engine
from .errors import IngestWarning, InvalidInputError

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def is_hdf5_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an HDF5 file (or NetCDF 4): its signature at byte 0, or after a user block of
    512, 1024, 2048... bytes, where the HDF5 format lets a superblock start."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            at = 0
            while at + len(HDF5_MAGIC) <= size:
                f.seek(at)
                if f.read(len(HDF5_MAGIC)) == HDF5_MAGIC:
                    return True
                at = 512 if at == 0 else 2 * at
    except OSError:
        pass
    return False


def h5py_module():
    try:
        import h5py
    except ImportError:
        raise InvalidInputError("reading HDF5 needs h5py: pip install 'cubeslab[hdf5]' (or h5py)") from None
    with contextlib.suppress(ImportError):  # registers bitshuffle, zfp and others with HDF5 for h5py's reads
        import hdf5plugin  # noqa: F401
    return h5py


def json_value(value):
    """An HDF5 attribute's value as JSON can hold it."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, np.ndarray):
        return (
            [json_value(v) for v in value.tolist()]
            if value.dtype.kind != "S"
            else [v.decode(errors="replace") for v in value.tolist()]
        )
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, (bool, int, float, str, list)) else str(value)


def _listed_coordinates(data) -> list[str]:
    """The names a dataset's CF ``coordinates`` attribute lists."""
    value = data.attrs.get("coordinates")
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    return text.split() if isinstance(text, str) else []


def listed_path(dataset: str, listed: str, names: set[str]) -> str:
    """The dataset that ``dataset``'s ``coordinates`` attribute means by ``listed``: an absolute name as it
    is; a relative one in the nearest group, from the dataset's own up to the root, that holds it (CF's
    search by proximity)."""
    if listed.startswith("/"):
        return listed
    group = posixpath.dirname(dataset)
    while True:
        path = posixpath.join(group, listed)
        if path in names or group == "/":
            return path if path in names else posixpath.join(posixpath.dirname(dataset), listed)
        group = posixpath.dirname(group)


def datasets_in(h5py, group) -> list[str]:
    """Every dataset under ``group``, by absolute name, external links to datasets of other files too
    (h5py reads through them, but visiting the file's objects does not follow them)."""
    found: list[str] = []
    seen: set = set()  # a dataset hard-linked under two names (NeXus does) is listed once

    def visit(name: str, link) -> None:
        if isinstance(link, h5py.HardLink):
            target = group.get(name)
            if isinstance(target, h5py.Dataset):
                if target.id in seen:  # h5py's identifiers are equal, and hash alike, for one object
                    return
                seen.add(target.id)
        elif isinstance(link, h5py.ExternalLink):
            try:
                target = group.get(name)
            except (KeyError, OSError):  # a link to a file or object not there
                return
        else:
            return  # a soft link is another name for an object listed already
        if isinstance(target, h5py.Dataset):
            found.append("/" + name)

    group.visititems_links(visit)
    return found


# netCDF-C's names in HDF5: a variable named like a dimension it is not the coordinate of (``x(y, x)``) is
# stored under this prefix, since the dimension's scale holds the plain name; a dimension without a
# coordinate variable is a scale whose NAME attribute starts with the sentence below.
NON_COORDINATE_PREFIX = "_nc4_non_coord_"
DIMENSION_WITHOUT_VARIABLE = b"This is a netCDF dimension but not a netCDF variable."


def is_bare_dimension(data) -> bool:
    """Whether an HDF5 dataset is a NetCDF 4 dimension that no variable holds values for."""
    name = data.attrs.get("NAME")
    return isinstance(name, bytes) and name.startswith(DIMENSION_WITHOUT_VARIABLE)


def netcdf_variable_dataset(h5py, f, variable: str) -> str | None:
    """The HDF5 dataset that holds NetCDF 4 variable ``variable`` (an absolute name, ``/group/v``), or
    None when there is no such variable (a bare dimension's scale is not one)."""
    group, _, base = variable.rpartition("/")
    renamed = f"{group}/{NON_COORDINATE_PREFIX}{base}"
    if isinstance(f.get(renamed), h5py.Dataset):
        return renamed
    data = f.get(variable)
    return variable if isinstance(data, h5py.Dataset) and not is_bare_dimension(data) else None


def netcdf_variables_in(h5py, f) -> list[str]:
    """Every NetCDF 4 variable of an open file, by its NetCDF name with its group (``grp/v``)."""
    names = []
    for name in datasets_in(h5py, f):
        if not is_bare_dimension(f[name]):
            group, _, base = name.rpartition("/")
            names.append(f"{group}/{base.removeprefix(NON_COORDINATE_PREFIX)}".lstrip("/"))
    return names


def open_dataset(
    path: str | os.PathLike, dataset: str | None = None, *, flag: str = "--dataset", variable: bool = False
):
    """The open h5py file and the numeric N-D dataset ``dataset`` in it (or its only such dataset),
    with its name; refused with the datasets listed when there is no such dataset, and for virtual
    datasets and external storage. ``flag`` is how the caller names the choice in messages; with
    ``variable``, ``dataset`` names a NetCDF 4 variable (``v`` or ``grp/v``), found by netCDF-C's naming."""
    h5py = h5py_module()
    try:
        f = h5py.File(path, "r")
    except OSError as error:
        raise InvalidInputError(f"{path}: not an HDF5 file h5py reads: {error}") from None
    if dataset is not None and not dataset.startswith("/"):
        dataset = "/" + dataset
    if variable and dataset is not None:
        found = netcdf_variable_dataset(h5py, f, dataset)
        if found is None:
            listed = ", ".join(netcdf_variables_in(h5py, f)) or "none"
            f.close()
            raise InvalidInputError(f"{path}: no variable {dataset.lstrip('/')}; the variables: {listed}")
        dataset = found
    if dataset is None or not isinstance(f.get(dataset), h5py.Dataset):
        # Only to choose, or to say what exists: listing a file of many objects takes a while.
        names = datasets_in(h5py, f)
        if dataset is None:
            scales = {n for n in names if f[n].attrs.get("CLASS") == b"DIMENSION_SCALE"}
            # Datasets another lists in a CF `coordinates` attribute (an export's lat and lon) are not data.
            known = set(names)
            coordinates = {listed_path(n, c, known) for n in names for c in _listed_coordinates(f[n])}
            candidates = [
                n for n in names
                if n not in scales and n not in coordinates and f[n].ndim >= 1 and f[n].dtype.kind in "biuf"
            ]  # fmt: skip
            if len(candidates) != 1:
                listed = (
                    ", ".join(
                        f"{n} {'empty' if f[n].shape is None else f[n].shape} {f[n].dtype}" for n in names
                    )
                    or "none"
                )
                f.close()
                raise InvalidInputError(
                    f"{path}: {'no' if not candidates else 'more than one'} N-D numeric dataset; choose one "
                    f"with {flag} (the datasets: {listed})"
                )
            dataset = candidates[0]
        else:
            f.close()
            raise InvalidInputError(
                f"{path}: no dataset {dataset}; the datasets: {', '.join(names) or 'none'}"
            )
    data = f[dataset]
    problem = None
    if data.dtype.kind not in "biuf":
        problem = f"holds {data.dtype}, not numbers cubeslab stores"
    elif data.shape is None:  # HDF5's null dataspace (h5py.Empty): no values at all
        problem = "is empty (a null dataspace: no values, not even one)"
    elif data.ndim == 0:
        problem = f"is a scalar; cubeslab stores 1 to {_engine.max_dims()} dimensions"
    elif data.is_virtual:
        problem = "is virtual (its data lies in other files)"
    elif data.external:
        problem = f"keeps its data in external files {data.external}"
    if problem:
        f.close()
        raise InvalidInputError(f"{path}: dataset {dataset} {problem}")
    return f, data, dataset


# HDF5's and netCDF-4's bookkeeping attributes: structure, not metadata of the values.
INTERNAL_ATTRIBUTES = frozenset(
    {
        "DIMENSION_LIST",
        "DIMENSION_LABELS",
        "REFERENCE_LIST",
        "CLASS",
        "NAME",
        "_Netcdf4Dimid",
        "_Netcdf4Coordinates",
        "_nc3_strict",
    }
)


def dataset_attributes(data) -> dict:
    """A dataset's own attributes as JSON values, an array of one as its one value: netCDF-C and many
    HDF5 writers hold a single value so, and netCDF4 and xarray read it as the value."""
    return {k: _single(json_value(v)) for k, v in data.attrs.items() if k not in INTERNAL_ATTRIBUTES}


def _single(value):
    return (
        value[0] if isinstance(value, list) and len(value) == 1 and not isinstance(value[0], list) else value
    )


def auxiliary_coordinates(data, largest: int) -> dict[str, tuple[tuple[int, ...], np.ndarray, dict]]:
    """The arrays ``data``'s CF ``coordinates`` attribute lists (a curvilinear grid's lat and lon), by
    name: the axes of ``data`` each lies along, its values (numbers, or text labels) and attributes. One
    that cannot be placed on those axes, is not numbers or UTF-8 text, or is larger than ``largest``
    bytes is left out with an :class:`IngestWarning` naming it."""
    known = set(datasets_in(h5py_module(), data.file))
    found: dict[str, tuple[tuple[int, ...], np.ndarray, dict]] = {}
    for listed in _listed_coordinates(data):
        path = listed_path(data.name, listed, known)
        name = posixpath.basename(path)
        placed = _auxiliary(data, data.file.get(path) if path in known else None, largest)
        if isinstance(placed, str) or name in found:
            problem = placed if isinstance(placed, str) else f"has the name of another listed one ({name})"
            message = f"{data.file.filename}: coordinate {listed} of {data.name} {problem}; not stored"
            warnings.warn(IngestWarning(message), stacklevel=3)
            continue
        found[name] = placed
    return found


def _auxiliary(data, aux, largest: int) -> tuple[tuple[int, ...], np.ndarray, dict] | str:
    """An auxiliary coordinate's axes, values and attributes, or what keeps it out."""
    h5py = h5py_module()
    if aux is None or not isinstance(aux, h5py.Dataset) or aux.shape is None:
        return "is no dataset of the file"
    text = h5py.check_string_dtype(aux.dtype) is not None
    if not text and aux.dtype.kind not in "biuf":
        return f"holds {aux.dtype}, not numbers or text"
    if aux.nbytes > largest:
        return f"holds {aux.nbytes:,} bytes, more than the {largest:,} an ingest reads whole"
    axes = _placed_on(aux, data)
    if axes is None:
        return f"of shape {aux.shape} lies along no axes of {data.shape} that its scales or sizes name"
    if not text:
        return axes, np.asarray(aux[...]), dataset_attributes(aux)
    try:
        return axes, np.array(aux.asstr(encoding="utf-8")[...], dtype=str), dataset_attributes(aux)
    except UnicodeDecodeError:
        return "is not UTF-8 text"


def _placed_on(aux, data) -> tuple[int, ...] | None:
    """The axes of ``data`` that the sides of ``aux`` lie along: each side's dimension scale where it
    shares one with ``data``, else the one way of matching its sides' lengths in order, or None."""
    scales = [{s.id for s in dim.values()} for dim in data.dims]
    shared = [
        next((d for d, own in enumerate(scales) if {s.id for s in dim.values()} & own), -1)
        for dim in aux.dims
    ]
    if -1 not in shared and len(set(shared)) == len(shared):
        return tuple(shared)
    matches = [
        axes for axes in itertools.combinations(range(data.ndim), aux.ndim)
        if all(data.shape[d] == n for d, n in zip(axes, aux.shape, strict=True))
    ]  # fmt: skip
    return matches[0] if len(matches) == 1 else None


def dataset_axes(data) -> list[dict]:
    """Each dimension's name, and origin, step and unit where a dimension scale gives them (an uneven
    scale, or one of text labels, its ``values``, origin and step None)."""
    axes = []
    for d, dim in enumerate(data.dims):
        axis = {"name": dim.label or f"dim_{d}", "origin": 0.0, "step": 1.0, "unit": None}
        if len(dim):
            scale = dim[0]
            axis["name"] = dim.label or scale.name.rsplit("/", 1)[-1]
            if (
                scale.ndim == 1
                and len(scale) == data.shape[d]
                and h5py_module().check_string_dtype(scale.dtype)
            ):
                try:  # text labels (region names, ...), as UTF-8 whatever the type says (ASCII for bytes)
                    labels = np.asarray(scale.asstr(encoding="utf-8")[...], dtype=str)
                except UnicodeDecodeError:
                    axes.append(axis)  # not UTF-8 text: the axis stays numbered
                    continue
                axis["origin"], axis["step"], axis["values"] = None, None, labels
                axes.append(axis)
                continue
            if scale.ndim != 1 or scale.dtype.kind not in "biuf":
                axes.append(axis)  # a scale of several dimensions, or of other types: no origin and step
                continue
            values = np.asarray(scale[...], dtype=np.float64)
            steps = np.diff(values)
            if values.size and (steps.size == 0 or np.allclose(steps, steps[0], rtol=1e-9, atol=0)):
                axis["origin"], axis["step"] = float(values[0]), float(steps[0]) if steps.size else 1.0
            elif values.size == data.shape[d] and np.isfinite(values).all():  # uneven: kept as they are
                axis["origin"], axis["step"], axis["values"] = None, None, values
            unit = scale.attrs.get("units")
            axis["unit"] = json_value(unit) if unit is not None else None
        axes.append(axis)
    return axes
