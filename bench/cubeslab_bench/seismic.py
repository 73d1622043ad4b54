"""Seismic inputs and readers shared by the seismic studies (pyrus, queue-depth, peers).

A volume is addressed by position (inline, crossline, sample); every tool's reader takes the same
numpy basic index, so one list of accesses drives every tool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy

from .measure import cold_runs, files_under, warm_runs
from .tools import segy_import

Reader = Callable[[tuple], np.ndarray]
ITEM = 4  # float32


def survey(data: Path, shape: tuple[int, int, int]) -> Path:
    """A generated post-stack survey of ``shape`` as SEG-Y in ``data`` (kept and reused)."""
    path = Path(data) / f"survey-{'x'.join(map(str, shape))}.sgy"
    if not path.exists():
        tmp = path.with_suffix(".sgy.tmp")
        write_segy(tmp, SyntheticSurvey(*shape), inlines_per_block=16)
        tmp.replace(path)
    return path


def planes(shape) -> dict[str, tuple]:
    """The three planes through the middle: name → index."""
    n0, n1, n2 = shape
    return {
        "inline": (n0 // 2, slice(None), slice(None)),
        "crossline": (slice(None), n1 // 2, slice(None)),
        "time slice": (slice(None), slice(None), n2 // 2),
    }


def accesses(shape) -> dict[str, tuple]:
    """Planes, a trace and a 64^3 sub-volume (clipped to the volume)."""
    n0, n1, _ = shape
    sides = [min(64, n) for n in shape]
    sub = tuple(
        slice(n // 3, n // 3 + s) if n // 3 + s <= n else slice(n - s, n)
        for n, s in zip(shape, sides, strict=True)
    )
    return {**planes(shape), "trace": (n0 // 2, n1 // 2, slice(None)), "sub-volume 64^3": sub}


def key_bytes(shape, key: tuple) -> int:
    return ITEM * int(
        np.prod(
            [
                len(range(*k.indices(n))) if isinstance(k, slice) else 1
                for n, k in zip(shape, key, strict=True)
            ]
        )
    )


def floats(shape, key) -> int:
    return key_bytes(shape, key) // ITEM


# -- writers: each returns what the store takes on disk ---------------------------------------------


def write_h5py(path: Path, volume: np.ndarray, chunks=None, **options) -> None:
    import h5py

    with h5py.File(path, "w") as f:
        chunks = tuple(min(c, n) for c, n in zip(chunks, volume.shape, strict=True)) if chunks else None
        f.create_dataset("amplitude", data=volume, chunks=chunks, **options)


def write_zarr(path: Path, volume: np.ndarray, chunks) -> None:
    import zarr

    shutil.rmtree(path, ignore_errors=True)
    array = zarr.create_array(
        path, shape=volume.shape, chunks=tuple(chunks), dtype=volume.dtype, compressors=None
    )
    array[...] = volume


def ingest_mdio(sgy: Path, out: Path) -> None:
    import mdio
    from mdio.builder.template_registry import get_template
    from segy.standards import get_segy_standard

    shutil.rmtree(out, ignore_errors=True)
    mdio.segy_to_mdio(get_segy_standard(1.0), get_template("PostStack3DTime"), sgy, out, overwrite=True)


def ingest_openvds(sgy: Path, out: Path, method: str = "None") -> None:
    importer = segy_import()
    if importer is None:
        raise RuntimeError("OpenVDS's SEGYImport command is not installed")
    out.unlink(missing_ok=True)
    command = [
        importer,
        "--vdsfile",
        str(out),
        "--compression-method",
        method,
        "--disable-print-text-header",
    ]
    if method.startswith("Wavelet"):
        command += ["--tolerance", "1"]  # OpenVDS's lossy setting: error tolerance 1 (of 255 levels)
    done = subprocess.run([*command, str(sgy)], capture_output=True, text=True)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"SEGYImport failed: {(done.stderr or done.stdout).strip()[-300:]}")


def ingest_seismic_zfp(sgy: Path, out: Path, bits: int = 8) -> None:
    from seismic_zfp.conversion import SegyConverter

    SegyConverter(str(sgy)).run(str(out), bits_per_voxel=bits)


# -- readers: open(path) → read(key) ----------------------------------------------------------------


def open_cubeslab(store: Path, verify: bool = True) -> Reader:
    return cubeslab.open(store, verify=verify).amplitude.read


def open_h5py(path: Path) -> Reader:
    import h5py

    dataset = h5py.File(path, "r")["amplitude"]
    return lambda key: dataset[key]


def open_zarr(path: Path) -> Reader:
    import zarr

    array = zarr.open_array(path, mode="r")
    return lambda key: np.asarray(array[key])


def open_tensorstore(path: Path) -> Reader:
    import tensorstore as ts

    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(path)},
        "context": {"cache_pool": {"total_bytes_limit": 0}},
    }
    store = ts.open(spec).result()
    return lambda key: store[key].read().result()


def open_segyio(path: Path) -> Reader:
    """What a segyio user writes for each access: lines and depth slices by label, traces by number,
    a sub-volume cut from the inlines it spans."""
    import segyio

    f = segyio.open(path, "r")
    n_xl = len(f.xlines)

    def read(key):
        il, xl, k = key
        if isinstance(il, int) and xl == slice(None) and k == slice(None):
            return f.iline[f.ilines[il]]
        if isinstance(xl, int) and il == slice(None) and k == slice(None):
            return f.xline[f.xlines[xl]]
        if isinstance(k, int) and il == slice(None) and xl == slice(None):
            return f.depth_slice[k]
        if isinstance(il, int) and isinstance(xl, int):
            return f.trace[il * n_xl + xl][k]
        rows = range(*il.indices(len(f.ilines))) if isinstance(il, slice) else [il]
        return np.stack([f.iline[f.ilines[i]][xl, k] for i in rows])

    return read


def open_mdio(path: Path) -> Reader:
    import mdio

    amplitude = mdio.open_mdio(path)["amplitude"]
    return lambda key: amplitude.isel(dict(zip(amplitude.dims, key, strict=True))).values


def open_openvds(path: Path) -> Reader:
    import openvds

    handle = openvds.open(str(path), "")
    manager = openvds.getAccessManager(handle)
    layout = openvds.getLayout(handle)
    shape = [layout.getDimensionNumSamples(d) for d in (2, 1, 0)]  # VDS: samples, crosslines, inlines
    r32 = openvds.VolumeDataChannelDescriptor.Format.Format_R32

    def read(key, _handle=handle):  # the default keeps the file open as long as the reader lives
        lo, hi, out_shape = [0] * 6, [1] * 6, []
        for axis, (k, n) in enumerate(zip(key, shape, strict=True)):
            start, stop = (k, k + 1) if isinstance(k, int) else k.indices(n)[:2]
            lo[2 - axis], hi[2 - axis] = start, stop
            if not isinstance(k, int):
                out_shape.append(stop - start)
        request = manager.requestVolumeSubset(tuple(lo), tuple(hi), format=r32)
        return np.asarray(request.data).reshape(out_shape)

    return read


def open_seismic_zfp(path: Path) -> Reader:
    from seismic_zfp.read import SgzReader

    reader = SgzReader(str(path))
    n_xl = reader.n_xlines

    def read(key):
        il, xl, k = key
        if isinstance(il, int) and xl == slice(None) and k == slice(None):
            return reader.read_inline(il)
        if isinstance(xl, int) and il == slice(None) and k == slice(None):
            return reader.read_crossline(xl)
        if isinstance(k, int) and il == slice(None) and xl == slice(None):
            return reader.read_zslice(k)
        if isinstance(il, int) and isinstance(xl, int):
            return reader.get_trace(il * n_xl + xl)
        return reader.read_subvolume(il.start, il.stop, xl.start, xl.stop, k.start, k.stop)

    return read


def timed_write(action: Callable[[], object]) -> float:
    """Seconds for ``action`` including getting its files to the disk (sync)."""
    t0 = time.perf_counter()
    action()
    os.sync()
    return time.perf_counter() - t0


def time_accesses(opener, path: Path, keys: dict[str, tuple], shape, runs: int) -> dict:
    """Warm and cold timings of each access with one tool: name → {"warm", "cold", "floats"}.

    ``opener(path)`` gives a reader; cold runs open a fresh one after evicting every file under ``path``.
    """
    files = files_under(path)
    out = {}
    for name, key in keys.items():
        reader = opener(path)
        warm = warm_runs(partial(reader, key), runs)
        del reader

        def fresh(key=key):
            reader = opener(path)
            return lambda: reader(key)

        out[name] = {"warm": warm, "cold": cold_runs(fresh, files, runs), "floats": floats(shape, key)}
    return out


def read_through(path: Path) -> None:
    """Read a file once so its pages are in the page cache."""
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass
