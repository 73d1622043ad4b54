"""`cubeslab.open`: the right reader for a path — a cube store (a survey, any Zarr v3 array, an MDIO
store), a store of a registered kind (an MSI cube), or an HDF5 / NetCDF 4 file read in place."""

from __future__ import annotations

import os
from pathlib import Path

from . import defaults
from .array import ReadSettings
from .cube import Cube, read_node
from .errors import CubeslabError, InvalidInputError, OptionError
from .hdf5_array import Hdf5Array
from .hdf5_file import is_hdf5_file
from .locations import S3Path, store_path
from .schema import store_contents

KINDS: dict[str, type[Cube]] = {}
"""Cube classes for stores of a kind (``attributes["cubeslab"]["kind"]`` of the main array), registered by
the modules that define them (``cubeslab.msi``); :func:`open` returns one for such a store."""


def open(
    path: str | os.PathLike,
    mode: str = "r",
    *,
    cache: int | str | None = None,
    threads=None,
    in_flight=None,
    verify: bool = True,
    dataset: str | None = None,
    variable: str | None = None,
    storage_options: dict | None = None,
) -> Cube:
    """Open a cube store (cubeslab, MDIO v1, or a plain Zarr v3 array), or read an HDF5 dataset
    (``dataset="/group/name"``) or NetCDF 4 variable (``variable="name"``) in place, no ingest: that
    returns an :class:`~cubeslab.hdf5_array.Hdf5Array`, read-only.

    ``path`` may be a URL, ``s3://bucket/key``; ``storage_options`` (fsspec's names: ``key``,
    ``secret``, ``endpoint_url``, ``region``) connect to it, else the ``AWS_*`` environment variables.

    mode: ``"r"`` (the default) to read; ``"r+"`` to write windows of its amplitudes too, through a
    write-back cache of ``cache`` bytes (or a size such as ``"512MiB"``; default
    :data:`cubeslab.defaults.WRITE_CACHE`).
    """
    if mode not in ("r", "r+"):
        raise InvalidInputError(f"mode={mode!r}: open a store with mode 'r' (read) or 'r+' (read and write)")
    settings = ReadSettings(threads=threads, in_flight=in_flight, verify=verify)
    where = store_path(path, storage_options)
    if isinstance(where, S3Path):
        if dataset is not None or variable is not None:
            raise InvalidInputError(f"{path}: HDF5 and NetCDF files are read in place only on this machine")
    elif dataset is not None or variable is not None or is_hdf5_file(path):
        if os.path.isdir(where):
            option = "dataset=" if dataset is not None else "variable="
            raise OptionError(f"{path}: {option} opens an HDF5 or NetCDF file in place; this is a folder")
        if mode != "r":
            raise InvalidInputError(
                f"{path}: an HDF5 or NetCDF file is read in place, read-only; ingest it to write"
            )
        return Hdf5Array(path, dataset, settings, variable=variable)  # type: ignore[return-value]
    if mode == "r" and cache is not None:
        raise InvalidInputError("cache= is the write cache of mode='r+'; a store opened to read has none")
    if mode == "r+" and cache is None:
        cache = defaults.WRITE_CACHE
    return KINDS.get(kind_of(where), Cube)(where, settings, cache=cache)


def kind_of(path: str | os.PathLike) -> str:
    """The kind a store's main array records (``attributes["cubeslab"]["kind"]``), or ``""``: read from
    its metadata alone, so that the store is opened once, by the class of its kind."""
    try:
        where = store_path(path)
        contents = store_contents(where, to_read=False)
        main = where / Path(contents["main"]).name if contents["node_type"] == "group" else where
        attributes = read_node(main).get("attributes", {})
    except CubeslabError:
        return ""  # the cube's own opening says what is wrong
    ours = attributes.get("cubeslab") if isinstance(attributes, dict) else None
    kind = ours.get("kind") if isinstance(ours, dict) else None
    return kind if isinstance(kind, str) else ""
