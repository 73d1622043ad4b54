"""`create`: a new, empty N-D array store, open for window writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from . import _engine, defaults
from .array import Array, checked_fill_value, checked_shape_and_type, write_cache_limit, zarr_json
from .cube import Cube
from .description import create_arguments
from .errors import InvalidInputError, StoreExistsError
from .labels import write_values
from .locations import S3Path, publishing, store_path
from .opener import open
from .plan import plan


def create(
    path: str | os.PathLike,
    shape=None,
    dtype="float32",
    *,
    dims=None,
    coords: dict | None = None,
    layout: str = defaults.LAYOUT,
    chunks=None,
    shards=None,
    access: str | None = None,
    compress: str | None = None,
    fill_value=None,
    attributes: dict | None = None,
    cache: int | str | None = None,
    description: dict | None = None,
    storage_options: dict | None = None,
) -> Cube:
    """Create an empty N-D array store and open it for writing (as ``open(path, "r+")``).

    ``description``: a store's JSON description (see :func:`cubeslab.describe`) instead of the
    other arguments. ``coords``: 1-D coordinate values for some of ``dims`` (by name), and, as xarray
    takes them, other coordinates over some of the dimensions, ``{"lat": (("y", "x"), values)}`` or
    ``(dims, values, attributes)`` (CF's auxiliary coordinates, listed in the array's ``coordinates``
    attribute): the store is then a group holding the array (``data``) and an array per coordinate,
    as a survey holds its. Without ``chunks``, ``layout`` (as ingest's ``--layout``: ``auto``, ``cube:N``,
    ``AxBxC/DxExF``) chooses them; ``auto``: the planner picks chunks and shards for ``access``
    (default: every plane), as ingest does. ``compress`` takes the ``--compress`` names with fixed parameters
    (``zstd:3``, ``zfp:tolerance=0.01``, ...); error targets (``zfp:snr=40``,
    ``zfp:max-error=...``) need data to tune on and are refused here.

    ``path`` may be a URL, ``s3://bucket/key`` (``storage_options`` as for :func:`cubeslab.open`): the
    store's metadata and coordinates are written in a local staging folder, uploaded (its root
    document last), and the store is opened there.
    """
    if description is not None:
        given = {
            "shape": shape is not None, "dtype": dtype != "float32", "dims": dims is not None,
            "coords": coords is not None, "layout": layout != defaults.LAYOUT, "chunks": chunks is not None,
            "shards": shards is not None, "access": access is not None, "compress": compress is not None,
            "fill_value": fill_value is not None, "attributes": attributes is not None,
        }  # fmt: skip
        if any(given.values()):
            named = ", ".join(name for name, is_given in given.items() if is_given)
            raise InvalidInputError(f"create: a description says all of it; give it or {named}, not both")
        return create(
            path, cache=cache, storage_options=storage_options, **create_arguments(description)
        )  # fmt: skip
    if shape is None:
        raise InvalidInputError("create needs a shape (or a description)")
    where = store_path(path, storage_options)
    arguments = {
        "dims": dims, "coords": coords, "layout": layout, "chunks": chunks, "shards": shards,
        "access": access, "compress": compress, "fill_value": fill_value, "attributes": attributes,
    }  # fmt: skip
    if isinstance(where, S3Path):
        # Nothing is uploaded before the commit: a create that fails leaves nothing behind.
        try:
            with publishing(where, False) as publication:
                new_store(Path(publication.staging), shape, dtype, **arguments).close()
                publication.commit(False)
        except StoreExistsError:  # the publication's own message offers --overwrite, which create lacks
            raise StoreExistsError(f"{where} already exists; create makes a new store") from None
        return open(where, "r+", cache=cache)
    return new_store(where, shape, dtype, cache=cache, **arguments)


def new_store(
    path: Path,
    shape,
    dtype,
    *,
    dims=None,
    coords: dict | None = None,
    layout: str = defaults.LAYOUT,
    chunks=None,
    shards=None,
    access: str | None = None,
    compress: str | None = None,
    fill_value=None,
    attributes: dict | None = None,
    cache: int | str | None = None,
    identified: bool = False,
) -> Cube:
    """:func:`create` in a folder. ``identified``: the store, a group, records a generation, so that each
    shard of its data carries its identity and one missing or misplaced reads as damage, as in an ingested
    survey (for an ingest, which writes every shard; a created store's unwritten shards hold the fill
    value)."""
    if os.path.lexists(path) and not is_empty_or_ours(path):
        raise StoreExistsError(f"{path} already exists; create makes a new store (an empty folder, or none)")
    # Checked before anything is written, so that a refusal leaves no folder behind.
    write_cache_limit(cache)
    sides, dtype = checked_shape_and_type(path, shape, dtype)
    shape = tuple(sides)
    if fill_value is not None:
        checked_fill_value(path, fill_value, dtype)
    try:
        zarr_json(attributes or {})
    except InvalidInputError as error:
        raise InvalidInputError(f"{path}: attributes{error}") from None
    if chunks is None:
        if shards is not None:
            raise InvalidInputError("shards= needs chunks= (the chunks inside each shard)")
        picked = plan(shape, dtype, layout=layout, access=access, compress=compress, top=1)[0]["layout"]
        chunks, shards = picked["inner"], picked["shard"]
    coordinates = checked_coords(coords or {}, dims, shape)
    # An identified store is a group, so that its data array's name, which each shard's identity
    # records, is the same in the staging folder an ingest writes and where it is published.
    grouped = bool(coordinates) or identified
    array_path = Path(path) / MAIN_ARRAY if grouped else Path(path)
    generation = json.loads(_engine.new_generation_attributes()) if identified else {}
    if generation:
        recorded = (attributes or {}).get("cubeslab", {})
        attributes = {**(attributes or {}), "cubeslab": {**recorded, **generation["cubeslab"]}}
    if grouped:
        _engine.create_group(path, MAIN_ARRAY, zarr_json(generation))
    auxiliary = [name for name in coordinates if dims is None or name not in dims]
    if auxiliary:  # listed, as CF lists them, so that readers find them
        listed = str((attributes or {}).get("coordinates", "")).split()
        attributes = {
            **(attributes or {}),
            "coordinates": " ".join([*listed, *(a for a in auxiliary if a not in listed)]),
        }
    Array.create(
        array_path, shape, dtype, chunks=chunks, shards=shards, compress=compress,
        dimension_names=dims, attributes=attributes, fill_value=fill_value,
    )  # fmt: skip
    for name, (over, values, own) in coordinates.items():
        write_values(Path(path) / name, values, over, own)
    # Recorded so that info and verify say what it is: cubeslab's, with unwritten chunks as fill values.
    _engine.mark_created(path)
    return open(path, "r+", cache=cache)


def is_empty_or_ours(path: Path) -> bool:
    """Whether ``path`` is an empty folder, or one holding only a lock no other live process holds (a
    staging folder holds its writer's lock from the start)."""
    return (
        os.path.isdir(path)
        and set(os.listdir(path)) <= {_engine.store_lock_file()}
        and _engine.lock_holder(path) is None
    )


MAIN_ARRAY = "data"
"""The name of the array in a store that ``create`` makes with coordinates."""


def node_name_problem(name) -> str | None:
    """Why ``name`` cannot name an array beside the main one (a coordinate array is a folder named
    after its dimension), or None: it must stay one folder inside the store and clash with nothing the
    store keeps there."""
    if not isinstance(name, str) or not name.strip():
        return "is not a name"
    if "/" in name or "\\" in name or "\0" in name:
        return "holds a path separator"
    if name.startswith((".", "__")):
        return "starts with '.' or '__' (names the store keeps for itself)"
    if name in (MAIN_ARRAY, "zarr.json"):
        return "is the name of the store's own array or metadata"
    return None


def checked_coords(
    coords: dict, dims, shape: tuple[int, ...]
) -> dict[str, tuple[list[str], np.ndarray, dict]]:
    """Each coordinate's dimensions, values and attributes, by name: a dimension's 1-D and as long as it,
    another's (given as ``(dims, values[, attributes])``) over dimensions of the array, of their sizes."""
    if coords and dims is None:
        raise InvalidInputError("coords= names dimensions: give dims= too")
    if dims is not None and len(set(dims)) != len(list(dims)):
        raise InvalidInputError(f"dims: {list(dims)} names a dimension twice")
    if dims is not None and len(list(dims)) != len(shape):
        raise InvalidInputError(
            f"dims: {list(dims)} names {len(list(dims))} dimensions; the shape has {len(shape)}"
        )
    sizes = dict(zip(dims, shape, strict=True)) if dims is not None else {}
    out = {}
    for name, given in coords.items():
        over, values, attributes = (
            ([name], given, {}) if not isinstance(given, tuple) else _coordinate(name, given)
        )
        if (problem := node_name_problem(name)) is not None:
            raise InvalidInputError(f"coords: the coordinate {name!r} {problem}; name it otherwise")
        if name not in sizes and not isinstance(given, tuple):
            raise InvalidInputError(
                f"coords: {name!r} is not one of the dimensions {list(dims)}; give another coordinate as "
                f"(dimensions, values), as xarray takes it"
            )
        if name in sizes and over != [name]:
            raise InvalidInputError(f"coords: {name!r} is a dimension; its coordinate lies along it alone")
        unknown = [d for d in over if d not in sizes]
        if unknown or len(set(over)) != len(over):
            raise InvalidInputError(
                f"coords: {name!r} lies along {over}, not distinct dimensions of {list(dims)}"
            )
        values = np.asarray(values)
        wanted = tuple(sizes[d] for d in over)
        if values.shape != wanted and name in sizes:
            raise InvalidInputError(
                f"coords: {name!r} must be 1-D of length {wanted[0]}, not of shape {values.shape}"
            )
        if values.shape != wanted:
            raise InvalidInputError(
                f"coords: {name!r} along {over} must have shape {wanted}, not {values.shape}"
            )
        out[name] = (over, values, attributes)
    return out


def _coordinate(name: str, given: tuple) -> tuple[list[str], object, dict]:
    """``(dims, values)`` or ``(dims, values, attributes)``, checked; one dimension may be given by its
    name alone, as xarray takes it (``("x", values)``)."""
    if len(given) in (2, 3) and isinstance(given[0], str):
        given = ((given[0],), *given[1:])
    if len(given) not in (2, 3) or not isinstance(given[0], (list, tuple)):
        raise InvalidInputError(
            f"coords: {name!r} must be values, (dims, values) or (dims, values, attributes)"
        )
    attributes = given[2] if len(given) == 3 else {}
    if not isinstance(attributes, dict):
        raise InvalidInputError(f"coords: {name!r}'s attributes must be a dict")
    return [str(d) for d in given[0]], given[1], attributes
