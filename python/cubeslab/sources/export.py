"""A store out to an N-D array file: ``.npy``, or a SEPlib ``.H`` header and its binary; written slab by
slab (within a bounded memory) under a temporary name, then renamed into place."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from .. import defaults, schema
from ..errors import InvalidInputError, OptionError, StoreExistsError
from ..labels import is_text, is_text_node
from . import attribute_types, fill_attribute


def export_npy(store: str | os.PathLike, output: str | os.PathLike, *, overwrite: bool = False) -> int:
    """Write the store's array to ``output`` (.npy); returns the number of elements."""
    from ..cube import Cube

    if os.path.exists(output) and not overwrite:
        raise StoreExistsError(f"{output} already exists; pass overwrite (--overwrite) to replace it")
    array = Cube(store).amplitude
    temporary = f"{os.fspath(output)}.tmp"
    out = np.lib.format.open_memmap(temporary, mode="w+", dtype=array.dtype, shape=array.shape)
    try:
        for window in _slabs(array):
            out[window] = array[window]
        out.flush()
        del out
        os.replace(temporary, output)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return int(np.prod(array.shape))


def export_seplib(store: str | os.PathLike, output: str | os.PathLike, *, overwrite: bool = False) -> int:
    """Write the store as a SEPlib cube: ``output`` (.H) and its binary ``output@`` (xdr, big-endian),
    the store's last axis as n1. Returns the number of elements."""
    from ..description import describe

    header, binary = os.fspath(output), f"{os.fspath(output)}@"
    for path in (header, binary):
        if os.path.exists(path) and not overwrite:
            raise StoreExistsError(f"{path} already exists; pass overwrite (--overwrite) to replace it")
    description = describe(store)
    formats = {"f": ("xdr_float", ">f"), "i": ("xdr_int", ">i")}
    dtype = np.dtype(description["dtype"])
    if (dtype.kind, dtype.itemsize) not in (("f", 4), ("f", 8), ("i", 4)):
        raise InvalidInputError(f"{store}: SEPlib has no data_format for {dtype}")
    name, code = formats[dtype.kind]
    if dtype.itemsize == 8:
        name = "xdr_double"
    _need_an_axis(store, len(description["axes"]), "SEPlib cubes")
    uneven = [axis["name"] for axis in description["axes"] if axis.get("values") is not None]
    if uneven:
        raise InvalidInputError(
            f"{store}: axis {uneven[0]} is unevenly spaced, which a SEPlib header (o, d) cannot say; export "
            "to .nc or .h5, which keep its coordinates"
        )
    from ..cube import Cube

    array = Cube(store).amplitude
    temporary = f"{binary}.tmp"
    try:
        with open(temporary, "wb") as f:
            for window in _slabs(array):
                f.write(array[window].astype(f"{code}{dtype.itemsize}").tobytes())
        os.replace(temporary, binary)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    lines = []
    for number, axis in enumerate(reversed(description["axes"]), start=1):
        line = f"n{number}={axis['size']} o{number}={axis['origin']!r} d{number}={axis['step']!r}"
        line += f' label{number}="{axis["name"]}"'
        if axis.get("unit"):
            line += f' unit{number}="{axis["unit"]}"'
        lines.append(line)
    lines += [f"esize={dtype.itemsize} data_format={name}", f'in="{os.path.basename(binary)}"']
    with open(f"{header}.tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(f"{header}.tmp", header)
    return int(np.prod(array.shape))


def _check_free(paths: list[str], overwrite: bool) -> None:
    for path in paths:
        if os.path.exists(path) and not overwrite:
            raise StoreExistsError(f"{path} already exists; pass overwrite (--overwrite) to replace it")


def _need_an_axis(store, ndim: int, kind: str) -> None:
    """Refuse a 0-d array (one value) for a format whose arrays have axes."""
    if ndim == 0:
        raise InvalidInputError(
            f"{store}: a 0-d array (one value); {kind} have at least one axis: export to .npy, .nc or .h5"
        )


def _slabs(array):
    """Windows of the array whose values fit half the memory limit: runs along the first axis (the whole
    of a 0-d array)."""
    if array.ndim == 0:
        yield ()
        return
    row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize)
    rows = max(1, defaults.MEMORY_LIMIT // 2 // row_bytes)
    for start in range(0, array.shape[0], rows):
        yield (slice(start, min(start + rows, array.shape[0])),)


def _deflate_level(compress: str | None) -> int | None:
    """``None`` (no compression), or the level of ``"deflate"`` / ``"deflate:N"`` (default 4)."""
    if compress in (None, "none"):
        return None
    name, _, level = compress.partition(":")
    if name != "deflate" or (level and not (level.isdigit() and 1 <= int(level) <= 9)):
        raise OptionError(f"--compress {compress!r}: HDF5 and NetCDF exports take deflate or deflate:1..9")
    return int(level or 4)


class _Export:
    """What every export of a store needs: the main array, its name, axes and coordinates."""

    def __init__(self, store: str | os.PathLike):
        from ..cube import Cube
        from ..description import describe

        self.cube = Cube(store)
        self.array = self.cube.amplitude
        self.description = describe(store)
        main = os.path.basename(self.array.path.rstrip("/"))
        self.name = main if os.path.normpath(self.array.path) != os.path.normpath(self.cube.path) else "data"
        self.coordinates: dict[str, tuple[np.ndarray, dict]] = {}
        for axis, dim in zip(self.description["axes"], self.cube.dims, strict=True):
            stored = os.path.join(self.cube.path, dim, "zarr.json")
            if dim != self.name and os.path.isfile(stored):
                units = {"units": axis["unit"]} if axis.get("unit") else {}
                self.coordinates[dim] = (self.cube.coords[dim], units | self.cube.stored_attributes(dim))
            else:
                values = axis["origin"] + axis["step"] * np.arange(axis["size"], dtype=np.float64)
                units = {"units": axis["unit"]} if axis.get("unit") else {}
                self.coordinates[dim] = (values, units)

        # Other arrays of the group (a NetCDF source's auxiliary and scalar coordinates, a survey's
        # trace mask): name -> values, dimension names, attributes.
        self.auxiliary: dict[str, tuple[np.ndarray, list[str], dict]] = {}
        # Orientation copies hold the data again: not written twice.
        copies = {os.path.basename(os.path.normpath(copy)) for copy in self.array.copies}
        if os.path.normpath(self.array.path) != os.path.normpath(self.cube.path):
            for entry in sorted(os.listdir(self.cube.path)):
                node = _array_node(os.path.join(self.cube.path, entry))
                if entry in (self.name, *self.coordinates, *copies) or node is None:
                    continue
                dims = list(node.get("dimension_names") or [])
                if set(dims) <= set(self.cube.dims):
                    self.auxiliary[entry] = (self.cube.stored_values(entry), dims, node.get("attributes", {}))

    def attributes(self) -> dict:
        """The main array's attributes as HDF5 and NetCDF hold them, with their source's types."""
        return self.typed(self.name, self.description["attributes"], self.array.dtype)

    def typed(self, name: str, attributes: dict, dtype) -> dict:
        """Array ``name``'s ``attributes`` with the types the ingest recorded or CF gives (numeric lists
        as arrays, other nested values as JSON text)."""
        record = attribute_types.group_record(self.cube.attributes).get(name)
        return attribute_types.typed(attributes, dtype, record)

    def global_attributes(self) -> dict:
        """The group's own attributes (a NetCDF source's global ones), without cubeslab's bookkeeping."""
        own = {k: v for k, v in self.cube.attributes.items() if not schema.is_bookkeeping(k, v)}
        return self.typed(attribute_types.GROUP, own, self.array.dtype)

    def listed_coordinates(self) -> str:
        """The main array's CF ``coordinates`` attribute: every other array of the store is a coordinate of
        it (lat, lon, a survey's trace mask), listed so that readers, and an ingest, take them so."""
        return " ".join(self.auxiliary)

    def chunks(self) -> tuple[int, ...] | None:
        """The store's chunk shape within the array; None (contiguous) for an array without values or
        axes, which HDF5 cannot chunk."""
        if self.array.ndim == 0 or 0 in self.array.shape:
            return None
        return tuple(min(c, n) for c, n in zip(self.array.chunks, self.array.shape, strict=True))


def _array_node(path: str) -> dict | None:
    """The ``zarr.json`` of the array at ``path`` if it holds numbers of a type the engine reads or text
    labels (not, say, MDIO's header structs); None otherwise."""
    from .. import _engine

    try:
        with open(os.path.join(path, "zarr.json")) as f:
            metadata = json.load(f)
    except (OSError, ValueError):
        return None
    if metadata.get("node_type") != "array":
        return None
    return metadata if metadata.get("data_type") in _engine.dtypes() or is_text_node(metadata) else None


def _publish(write, output: str) -> None:
    """Run ``write(temporary)``, then rename it to ``output``; nothing is left behind on failure."""
    temporary = f"{output}.tmp"
    try:
        write(temporary)
        os.replace(temporary, output)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def export_hdf5(
    store: str | os.PathLike,
    output: str | os.PathLike,
    *,
    overwrite: bool = False,
    compress: str | None = None,
) -> int:
    """Write the store to ``output`` (.h5) with h5py: the main array as a dataset in the store's chunk
    shape (deflated on request), each axis as a dimension scale, the attributes kept."""
    from ..hdf5_file import INTERNAL_ATTRIBUTES, h5py_module

    h5py = h5py_module()
    level = _deflate_level(compress)
    _check_free([os.fspath(output)], overwrite)
    export = _Export(store)
    array = export.array

    def write(path: str) -> None:
        with h5py.File(path, "w") as f:
            options = {"compression": "gzip", "compression_opts": level} if level else {}
            data = f.create_dataset(
                export.name, shape=array.shape, dtype=array.dtype, chunks=export.chunks(), **options
            )
            for window in _slabs(array):
                data[window] = array[window]
            for key, value in export.attributes().items():
                if key not in INTERNAL_ATTRIBUTES:  # a store ingested before they were left out holds some
                    data.attrs[key] = value

            def small_dataset(name: str, values: np.ndarray, attributes: dict):
                """A coordinate or other small array as a dataset (text labels as variable-length strings)."""
                text = is_text(values)
                written = f.create_dataset(
                    name,
                    data=values.astype(object) if text else values,
                    dtype=h5py.string_dtype() if text else None,
                )
                for key, value in export.typed(name, attributes, values.dtype).items():
                    written.attrs[key] = value
                return written

            for d, (dim, (values, attributes)) in enumerate(export.coordinates.items()):
                scale = small_dataset(dim, values, attributes)
                scale.make_scale(dim)
                data.dims[d].attach_scale(scale)
            for d, dim in enumerate(export.cube.dims):  # HDF5's own record of the names, which h5py reads
                data.dims[d].label = dim
            for key, value in export.global_attributes().items():
                f.attrs[key] = value
            for name, (values, dims, other_attributes) in export.auxiliary.items():  # lat, lon, ... beside
                other = small_dataset(name, values, other_attributes)
                for d, dim in enumerate(dims):  # over the main array's axes, named by their scales
                    if dim in export.coordinates and dim != export.name:
                        other.dims[d].attach_scale(f[dim])
                    other.dims[d].label = dim
            if export.auxiliary:
                data.attrs["coordinates"] = export.listed_coordinates()

    _publish(write, os.fspath(output))
    return array.size


# NetCDF has no boolean type: booleans go as int8 marked dtype="bool", as xarray writes them and reads them
# back (netCDF4 refused them with a TypeError).
NETCDF_BOOL = np.dtype(np.int8)


def _netcdf_values(values: np.ndarray, attributes: dict) -> tuple[np.ndarray, dict]:
    """An array's values and attributes as NetCDF holds them (booleans as marked int8)."""
    if values.dtype != bool:
        return values, attributes
    return values.astype(NETCDF_BOOL), attributes | {"dtype": "bool"}


def _netcdf_variable(d, name: str, values: np.ndarray, dims: list[str], attributes: dict) -> None:
    """Write a coordinate or other small array of the store as a variable of NetCDF dataset ``d``: text
    labels as NetCDF 4 strings, as xarray writes them."""
    values, attributes = _netcdf_values(values, attributes)
    fill = attributes.pop("_FillValue", None)
    if is_text(values):
        variable = d.createVariable(name, str, tuple(dims))
        variable[...] = values.astype(object)
    else:
        fill = fill_attribute.decode(fill, values.dtype)
        variable = d.createVariable(name, values.dtype, tuple(dims), fill_value=fill)
        variable.set_auto_maskandscale(False)
        variable[...] = values
    variable.setncatts(_netcdf_attributes(attributes))


def _netcdf_attributes(attributes: dict) -> dict:
    """``attributes`` as NetCDF can hold them: it has no boolean type, so booleans become int8 1 and 0."""
    return {
        key: np.asarray(value, dtype=np.int8) if np.asarray(value).dtype == bool else value
        for key, value in attributes.items()
    }


def export_netcdf(
    store: str | os.PathLike,
    output: str | os.PathLike,
    *,
    overwrite: bool = False,
    compress: str | None = None,
) -> int:
    """Write the store to ``output`` (.nc, NetCDF 4) with netCDF4: one dimension and coordinate variable
    per axis, the main array as a variable in the store's chunk shape (deflated on request). Values go as
    stored: CF attributes (``scale_factor``, ``add_offset``, ``_FillValue``) travel with them."""
    try:
        import netCDF4
    except ImportError:
        raise InvalidInputError("writing NetCDF needs netCDF4: pip install 'cubeslab[netcdf]'") from None
    level = _deflate_level(compress)
    _check_free([os.fspath(output)], overwrite)
    export = _Export(store)
    array = export.array
    attributes = export.attributes()
    fill = fill_attribute.decode(attributes.pop("_FillValue", None), array.dtype)
    global_attributes = export.global_attributes()

    def write(path: str) -> None:
        with netCDF4.Dataset(path, "w", format="NETCDF4") as d:
            d.setncatts(_netcdf_attributes(global_attributes))
            for dim, (values, coordinate_attributes) in export.coordinates.items():
                d.createDimension(dim, len(values))
                if dim != export.name:
                    _netcdf_variable(
                        d, dim, values, [dim], export.typed(dim, coordinate_attributes, values.dtype)
                    )
            for name, (values, dims, other_attributes) in export.auxiliary.items():
                _netcdf_variable(d, name, values, dims, export.typed(name, other_attributes, values.dtype))
            deflate: dict[str, Any] = {"zlib": True, "complevel": level} if level else {}
            stored_type = NETCDF_BOOL if array.dtype == bool else array.dtype
            main = d.createVariable(
                export.name, stored_type, tuple(export.coordinates), fill_value=fill,
                chunksizes=export.chunks(), **deflate,
            )  # fmt: skip
            main.set_auto_maskandscale(False)
            marked = {"dtype": "bool"} if array.dtype == bool else {}
            listing = {"coordinates": export.listed_coordinates()} if export.auxiliary else {}
            main.setncatts(_netcdf_attributes(attributes) | marked | listing)
            for window in _slabs(array):
                main[window] = array[window].astype(stored_type)

    _publish(write, os.fspath(output))
    return array.size


# Types FITS stores through an offset (its convention for unsigned and signed bytes): stored type, BZERO.
FITS_OFFSET_TYPES = {
    "int8": ("uint8", -128),
    "uint16": ("int16", 1 << 15),
    "uint32": ("int32", 1 << 31),
    "uint64": ("int64", 1 << 63),
}
FITS_BITPIX = {"uint8": 8, "int16": 16, "int32": 32, "int64": 64, "float32": -32, "float64": -64}


# Cards that describe the HDU's structure, its data's encoding or its checksums: the export writes its own,
# consistent with the values it writes, never the source's.
FITS_STRUCTURAL = {
    "SIMPLE", "XTENSION", "BITPIX", "NAXIS", "EXTEND", "PCOUNT", "GCOUNT", "GROUPS", "EXTNAME", "EXTVER",
    "EXTLEVEL", "INHERIT", "BSCALE", "BZERO", "BLANK", "CHECKSUM", "DATASUM", "END",
}  # fmt: skip
FITS_WCS_CARD = re.compile(
    r"(CTYPE|CRVAL|CDELT|CRPIX|CUNIT|CROTA)\d+[A-Z]?|(PC|CD)\d+_\d+[A-Z]?|(PC|CD)\d{6}"
)


def _fits_cards(cards: dict, shape: tuple[int, ...]) -> dict:
    """The FITS source's cards an export keeps: all but the structural ones, and its WCS cards only if
    the header describes an array of the store's shape."""
    kept = {
        key: value
        for key, value in cards.items()
        if key not in FITS_STRUCTURAL and not re.fullmatch(r"NAXIS\d+", key) and len(key) <= 8
    }
    described = [cards.get(f"NAXIS{n}") for n in range(1, len(shape) + 1)]
    if cards.get("NAXIS") != len(shape) or described != list(reversed(shape)):
        kept = {key: value for key, value in kept.items() if not FITS_WCS_CARD.fullmatch(key)}
    return kept


def _linear_wcs(export: _Export) -> dict:
    """CTYPE and CUNIT of each axis, and CRPIX, CRVAL and CDELT where its coordinates are evenly spaced
    (FITS lists the last numpy axis first)."""
    from ..description import regular_axis

    cards: dict = {}
    axes = zip(reversed(export.description["axes"]), reversed(export.coordinates.values()), strict=True)
    for number, (axis, (values, _)) in enumerate(axes, start=1):
        cards[f"CTYPE{number}"] = axis["name"][:68]
        regular = regular_axis(np.asarray(values))
        if regular is None:  # no linear WCS gives these positions: the axis stays pixel indices, unitless
            continue
        cards[f"CRPIX{number}"], cards[f"CRVAL{number}"], cards[f"CDELT{number}"] = 1.0, *regular
        if axis.get("unit"):
            cards[f"CUNIT{number}"] = axis["unit"]
    return cards


def _fits_packing(attributes: dict, dtype: np.dtype, bzero: int) -> tuple[dict, tuple | None, list]:
    """How a store's values keep their meaning in FITS, from its CF attributes: the cards (an integer
    image's BSCALE, BZERO, and BLANK for its ``_FillValue``, on top of the offset its type needs; BUNIT),
    and for a float image the (scale, offset) to apply as it is written and the fill marks it writes as
    NaN, FITS's blank for floats (FITS scales integers only)."""
    cards: dict = {"BUNIT": attributes["units"][:68]} if isinstance(attributes.get("units"), str) else {}
    scale, offset = attributes.get("scale_factor", 1), attributes.get("add_offset", 0)
    numbers = isinstance(scale, (int, float)) and isinstance(offset, (int, float))
    packed = numbers and (scale, offset) != (1, 0)
    marks = [fill_attribute.decode(attributes["_FillValue"], dtype)] if "_FillValue" in attributes else []
    if dtype.kind in "iu":
        if packed or bzero:
            cards["BSCALE"], cards["BZERO"] = (scale, bzero * scale + offset) if packed else (1, bzero)
        if marks and isinstance(marks[0], (int, np.integer)):
            cards["BLANK"] = int(marks[0]) - bzero
        return cards, None, []
    return cards, (scale, offset) if packed else None, [m for m in marks if not np.isnan(m)]


def export_fits(store: str | os.PathLike, output: str | os.PathLike, *, overwrite: bool = False) -> int:
    """Write the store to ``output`` (.fits) as a primary image, streamed slab by slab with astropy. A FITS
    source's header cards are restored, its WCS as it was; a store without WCS cards gets a linear WCS
    axis per evenly spaced axis (CTYPE, CRPIX, CRVAL, CDELT, CUNIT)."""
    from .fits import _astropy

    fits = _astropy()
    _check_free([os.fspath(output)], overwrite)
    export = _Export(store)
    _need_an_axis(store, export.array.ndim, "FITS images")
    array = export.array
    name = array.dtype.name
    stored, bzero = FITS_OFFSET_TYPES.get(name, (name, 0))
    if stored not in FITS_BITPIX:
        raise InvalidInputError(f"{store}: FITS has no image type for {array.dtype}")
    header = fits.Header()
    header["SIMPLE"] = True
    header["BITPIX"] = FITS_BITPIX[stored]
    header["NAXIS"] = array.ndim
    for number, n in enumerate(reversed(array.shape), start=1):
        header[f"NAXIS{number}"] = n
    packing, scaling, marks = _fits_packing(export.description["attributes"], array.dtype, bzero)
    for key, value in packing.items():
        header[key] = value
    cards = _fits_cards(export.description["attributes"].get("fits_header", {}), array.shape)
    if not any(FITS_WCS_CARD.fullmatch(key) for key in cards):
        cards |= _linear_wcs(export)
    for key, value in cards.items():
        header[key] = value
    big_endian = np.dtype(stored).newbyteorder(">")

    def write(path: str) -> None:
        stream = fits.StreamingHDU(path, header)
        for window in _slabs(array):
            values = array[window]
            if name == "uint64":
                values = (values - np.uint64(bzero)).view(np.int64)
            elif bzero:
                values = (values.astype(np.int64) - bzero).astype(stored)
            elif scaling is not None or marks:
                blank = np.isin(values, marks)
                if scaling is not None:
                    values = (values * scaling[0] + scaling[1]).astype(values.dtype)
                values = np.where(blank, np.nan, values).astype(values.dtype)
            stream.write(values.astype(big_endian))
        stream.close()

    _publish(write, os.fspath(output))
    return array.size
