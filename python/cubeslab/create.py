"""`create`: a new, empty N-D array store, open for window writes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import _engine, defaults
from .array import Array, checked_fill_value, checked_shape_and_type, write_cache_limit
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
    other arguments. ``coords``: 1-D coordinate values for some of ``dims`` (by name): the store
    is then a group holding the array (``data``) and a coordinate array per name, as a survey
    holds its. Without ``chunks``, ``layout`` (as ingest's ``--layout``: ``auto``, ``cube:N``,
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
    if isinstance(where, S3Path):
        # Nothing is uploaded before the commit: a create that fails leaves nothing behind.
        with publishing(where, False) as publication:
            create(
                publication.staging, shape, dtype, dims=dims, coords=coords, layout=layout, chunks=chunks,
                shards=shards, access=access, compress=compress, fill_value=fill_value,
                attributes=attributes,
            ).close()  # fmt: skip
            publication.commit(False)
        return open(where, "r+", cache=cache)
    path = where
    if os.path.lexists(path) and not is_empty_or_ours(path):
        raise StoreExistsError(f"{path} already exists; create makes a new store (an empty folder, or none)")
    # Checked before anything is written, so that a refusal leaves no folder behind.
    write_cache_limit(cache)
    sides, dtype = checked_shape_and_type(path, shape, dtype)
    shape = tuple(sides)
    if fill_value is not None:
        checked_fill_value(path, fill_value, dtype)
    if chunks is None:
        if shards is not None:
            raise InvalidInputError("shards= needs chunks= (the chunks inside each shard)")
        picked = plan(shape, dtype, layout=layout, access=access, compress=compress, top=1)[0]["layout"]
        chunks, shards = picked["inner"], picked["shard"]
    coordinates = checked_coords(coords or {}, dims, shape)
    array_path = Path(path) / MAIN_ARRAY if coordinates else Path(path)
    if coordinates:
        _engine.create_group(path, MAIN_ARRAY)
    Array.create(
        array_path, shape, dtype, chunks=chunks, shards=shards, compress=compress,
        dimension_names=dims, attributes=attributes, fill_value=fill_value,
    )  # fmt: skip
    for name, values in coordinates.items():
        write_values(Path(path) / name, values, [name])
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


def checked_coords(coords: dict, dims, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Coordinate values by dimension name, each 1-D and as long as its dimension."""
    if coords and dims is None:
        raise InvalidInputError("coords= names dimensions: give dims= too")
    if dims is not None and len(set(dims)) != len(list(dims)):
        raise InvalidInputError(f"dims: {list(dims)} names a dimension twice")
    out = {}
    for name, values in coords.items():
        if name not in dims:
            raise InvalidInputError(f"coords: {name!r} is not one of the dimensions {list(dims)}")
        if (problem := node_name_problem(name)) is not None:
            raise InvalidInputError(f"coords: the dimension {name!r} {problem}; name it otherwise")
        values = np.asarray(values)
        n = shape[list(dims).index(name)]
        if values.shape != (n,):
            raise InvalidInputError(
                f"coords: {name!r} must be 1-D of length {n}, not of shape {values.shape}"
            )
        out[name] = values
    return out
