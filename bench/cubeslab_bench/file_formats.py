"""The file formats of the ``formats`` study, one adapter each (:class:`Tool`): ``write(path, arrays)``
creates the file (or folder) holding every named 2-D uint16 array; ``read(path, name, key)`` opens it,
reads ``key`` (a row block, possibly with steps) of one array and closes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

import cubeslab
from cubeslab.plan import plan as plan_layout

COLUMNS = 2048
"""Every dataset is (rows, 2048) uint16: a row is 4 KiB, a page, so row-block hyperslabs and the rows
of a strided selection are whole pages on disk (the published shapes are not given)."""
DTYPE = np.dtype("uint16")
ROW_BYTES = COLUMNS * DTYPE.itemsize
# -- keys


WHOLE = (slice(None), slice(None))


def is_whole(key) -> bool:
    return key == WHOLE


def split_steps(key):
    """(the row block holding ``key``, the steps to take within it)."""
    rows, cols = key
    return (slice(rows.start, rows.stop), slice(None)), (slice(None, None, rows.step), cols)


# -- the tools -----------------------------------------------------------------------------------------


class Tool:
    label = ""
    peer: str | None = None
    """Name ``--peers`` selects it by; None for cubeslab (always measured)."""
    suffix = ""
    many_limit: int | None = None
    """Most datasets case 5 writes with this tool (None: no limit); see :data:`CLASSIC_MANY`."""

    def prepare(self, shape: tuple[int, int], boxes: list[int], near: Path) -> None:
        """Called untimed before a shape is written; ``boxes``: row counts the reads will ask for."""

    def write(self, path: Path, arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def read(self, path: Path, name: str, key: tuple[slice, slice]) -> np.ndarray:
        raise NotImplementedError


class Cubeslab(Tool):
    label = "cubeslab"
    suffix = ".zarr"

    def __init__(self) -> None:
        self.layouts: dict[tuple[int, int], dict] = {}

    def prepare(self, shape, boxes, near) -> None:
        # The planner's pick for the reads this study makes (whole array and row blocks), planned once per
        # shape outside the timed write. The planner minimises the slowest weighted access: unweighted,
        # only the whole read would count (8 MiB chunks, a 1 MiB hyperslab reading 8), so each box is
        # weighted by the array's rows over its own, holding every read to the same time per byte.
        access = ",".join(f"box:{rows}x{COLUMNS}={shape[0] / rows:g}" for rows in sorted(set(boxes)))
        self.layouts[shape] = plan_layout(shape, DTYPE.name, access=access, near=near, top=1)[0]["layout"]

    def write(self, path, arrays) -> None:
        path.mkdir()
        for name, data in arrays.items():
            layout = self.layouts[data.shape]
            cubeslab.Array.from_numpy(path / name, data, chunks=layout["inner"], shards=layout["shard"])

    def read(self, path, name, key):
        return cubeslab.Array(path / name).read(key)


class H5py(Tool):
    label = "HDF5"
    peer = "h5py"
    suffix = ".h5"

    def write(self, path, arrays) -> None:
        import h5py

        with h5py.File(path, "w") as f:
            for name, data in arrays.items():
                f.create_dataset(name, data=data)  # contiguous: no chunks given, as published

    def read(self, path, name, key):
        import h5py

        with h5py.File(path, "r") as f:
            return f[name][key]


CLASSIC_MANY = 100
"""Most datasets case 5 writes in the classic format. There, through netCDF4-python, creating a variable
moves the bytes of every variable created before it (the data section shifts as the header grows; 100
variables of 1 MiB moved 5 GB here, fill off and no data yet written), so N of them move about N²/2 MiB:
500 GB, minutes per run, at the published 1000."""


NetCDFFormat = Literal["NETCDF4", "NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"]


class NetCDF(Tool):
    peer = "netcdf4"

    def __init__(self, file_format: NetCDFFormat, label: str, suffix: str) -> None:
        self.format, self.label, self.suffix = file_format, label, suffix
        self.many_limit = None if file_format == "NETCDF4" else CLASSIC_MANY

    def write(self, path, arrays) -> None:
        import netCDF4

        with netCDF4.Dataset(path, "w", format=self.format) as f:
            rows, cols = next(iter(arrays.values())).shape
            f.createDimension("y", rows)
            f.createDimension("x", cols)
            extra: dict[str, Any] = {"contiguous": True} if self.format == "NETCDF4" else {}
            # Every variable defined before any is written, as netCDF's guide advises: in the classic
            # format, defining one after data is written moves that data.
            variables = [f.createVariable(name, "u2", ("y", "x"), **extra) for name in arrays]
            for variable, data in zip(variables, arrays.values(), strict=True):
                variable[:] = data

    def read(self, path, name, key):
        import netCDF4

        with netCDF4.Dataset(path, "r") as f:
            # Unmasked: 65535 is uint16's default fill value and would come back masked.
            f.set_auto_mask(False)
            return f.variables[name][key]


class Fits(Tool):
    label = "FITS"
    peer = "astropy"
    suffix = ".fits"

    def write(self, path, arrays) -> None:
        from astropy.io import fits

        # Dataset i is HDU i: the primary array, then image extensions, as published.
        hdus = [
            fits.PrimaryHDU(data) if i == 0 else fits.ImageHDU(data) for i, data in enumerate(arrays.values())
        ]
        fits.HDUList(hdus).writeto(path)

    def read(self, path, name, key):
        from astropy.io import fits

        with fits.open(path) as hdus:
            hdu = hdus[int(name[1:])]
            if is_whole(key):
                data = hdu.data
                return data if data.flags.owndata else data.copy()
            # astropy's section gathers a stepped slice element by element (and returns int64), so the
            # row block is read through section and the steps taken in numpy.
            block, steps = split_steps(key)
            return np.ascontiguousarray(hdu.section[block][steps])


class Hdf4(Tool):
    label = "HDF4"
    peer = "pyhdf"
    suffix = ".hdf"

    def write(self, path, arrays) -> None:
        from pyhdf.SD import SD, SDC

        sd = SD(str(path), SDC.WRITE | SDC.CREATE)
        try:
            for name, data in arrays.items():
                dataset = sd.create(name, SDC.UINT16, data.shape)
                dataset[:] = data
                dataset.endaccess()
        finally:
            sd.end()

    def read(self, path, name, key):
        from pyhdf.SD import SD

        sd = SD(str(path))
        try:
            dataset = sd.select(name)
            data = np.asarray(dataset[key], dtype=DTYPE)
            dataset.endaccess()
            return data
        finally:
            sd.end()


class InPlace(Tool):
    """cubeslab reading another format's file as it is (``cubeslab.open(file, dataset=...)``), no ingest:
    the file written by ``writer``."""

    def __init__(self, writer: Tool, keyword: str) -> None:
        self.writer, self.keyword = writer, keyword
        self.label, self.peer, self.suffix = f"cubeslab:{writer.label}", writer.peer, writer.suffix
        self.many_limit = writer.many_limit

    def write(self, path, arrays) -> None:
        self.writer.write(path, arrays)

    def read(self, path, name, key):
        return cubeslab.open(path, **{self.keyword: name})[key]


class Raw(Tool):
    label = "raw"
    peer = "numpy"
    suffix = ".raw"

    def __init__(self) -> None:
        self.shapes: dict[Path, tuple[int, int]] = {}
        """Raw files hold no shape: the reader knows it out of band, as the published 'System' did."""

    def write(self, path, arrays) -> None:
        path.mkdir()
        for name, data in arrays.items():
            data.tofile(path / f"{name}.bin")
            self.shapes[path / f"{name}.bin"] = data.shape

    def read(self, path, name, key):
        file = path / f"{name}.bin"
        rows, cols = self.shapes[file]
        block, steps = split_steps(key)
        r0, r1, _ = block[0].indices(rows)
        data = np.fromfile(file, DTYPE, count=(r1 - r0) * cols, offset=r0 * cols * DTYPE.itemsize)
        data = data.reshape(r1 - r0, cols)
        return data if steps == (slice(None), slice(None)) else np.ascontiguousarray(data[steps])


def all_tools() -> list[Tool]:
    hdf5, netcdf4 = H5py(), NetCDF("NETCDF4", "netCDF-4", ".nc4")
    return [
        Cubeslab(),
        hdf5,
        InPlace(hdf5, "dataset"),
        netcdf4,
        InPlace(netcdf4, "variable"),
        # netCDF 3.5's classic format, the one the reference measured; CDF5 is the classic variant with
        # unsigned 16-bit integers.
        NetCDF("NETCDF3_64BIT_DATA", "netCDF-CDF5", ".cdf5"),
        Fits(),
        Hdf4(),
        Raw(),
    ]
