"""SEG-Y ⇄ cube store: `ingest` and `export`, thin drivers of the engine."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import _engine, cluster_ingest, defaults, schema
from .compression import with_max_error
from .errors import (
    CubeslabIOError,
    GeometryError,
    IngestWarning,
    InvalidInputError,
    OptionError,
    StoreNotFoundError,
)
from .jobs import Phase, ProgressCallback, run_watched
from .locations import (
    FetchedSource,
    is_remote,
    local_only,
    named_by_url,
    naming_sources,
    source_origin,
    storage_options_of,
    store_path,
)
from .msi.ingest import ingest_imzml, is_imzml
from .schema import store_contents
from .segy_export import said_left_out
from .sources import FORMAT_BY_SUFFIX, array_source, is_netcdf
from .sources.ingest import ingest_array
from .sources.netcdf import ingest_netcdf
from .sources.unreadable import reading


def measure_first(
    store: str | os.PathLike,
    profile: str | os.PathLike | None,
    source_bytes: int,
    progress: ProgressCallback | None,
) -> str | None:
    """The device profile to plan with (see :func:`cubeslab.plan.profile_for_ingest`); a quick
    measurement made for it is reported as phase 0."""
    from .plan import AUTO_PROFILE_MIN_BYTES, profile_for_ingest
    from .profiles import auto_profile_enabled, find_profile

    name = "measure this disk (once)"
    will_measure = (
        source_bytes >= AUTO_PROFILE_MIN_BYTES
        and auto_profile_enabled()
        and find_profile(store, profile) is None
    )
    if will_measure and progress is not None:
        progress(Phase(name, 0, "items", 0, 1))
    text, measured = profile_for_ingest(store, profile, source_bytes)
    if measured and progress is not None:
        progress(Phase(name, 0, "items", 1, 1))
    return text


@contextmanager
def fetched_source(url: str | os.PathLike, storage_options: dict | None = None) -> Iterator[FetchedSource]:
    """A source file on object storage, downloaded to a temporary folder for the ingest (an imzML file
    with the ``.ibd`` beside it), removed afterwards."""
    url = os.fspath(url)
    name = url.rsplit("/", 1)[-1]
    if name.lower().endswith(".h"):
        raise InvalidInputError(f"{url}: a SEPlib header names its binary by path; copy both here first")
    with tempfile.TemporaryDirectory(prefix="cubeslab-source-") as folder:
        local = os.path.join(folder, name or "source")
        _, version = _engine.download(url, local, storage_options)
        if is_imzml(name):
            stem = url[: -len(".imzML")]
            _engine.download(stem + ".ibd", local[: -len(".imzML")] + ".ibd", storage_options)
        yield FetchedSource(url, local, version)


@contextmanager
def fetched_store(url: str | os.PathLike, beside: str | os.PathLike) -> Iterator[str]:
    """A store on object storage copied to a temporary folder beside ``beside`` (the export's output,
    which needs as much room), for the exports that write from a local store; removed afterwards."""
    where = store_path(url)
    store_contents(where)  # a store that may not be read is refused here, by its URL
    folder = tempfile.mkdtemp(prefix=".cubeslab-export-", dir=os.path.dirname(os.path.abspath(beside)))
    try:
        local = os.path.join(folder, "store.zarr")
        _engine.download_store(os.fspath(where), local, storage_options_of(where))
        yield local
    finally:
        shutil.rmtree(folder, ignore_errors=True)


DTYPE_APPLIES_TO = "SEG-Y ingest and raw bytes (with shape)"
"""The sources ``dtype`` means something for; others refuse it."""


def ingest(
    source: str | os.PathLike,
    store: str | os.PathLike,
    *,
    overwrite: bool = False,
    resume: bool = False,
    durable: bool = False,
    dtype: str | None = None,
    compress: str | None = None,
    max_error: str | float | None = None,
    layout: str = defaults.LAYOUT,
    access: str | None = None,
    views: Sequence[str] | None = None,
    profile: str | os.PathLike | None = None,
    memory_limit: int | None = None,
    threads: int | None = None,
    endian: str = defaults.ENDIAN,
    inline_byte: int = defaults.INLINE_BYTE,
    crossline_byte: int = defaults.CROSSLINE_BYTE,
    offset_byte: int = defaults.OFFSET_BYTE,
    allow_truncated: bool = False,
    sample_interval_us: float | None = None,
    vertical: str = defaults.VERTICAL,
    shape=None,
    order: str = "C",
    offset: int = 0,
    hdu: int | None = None,
    dataset: str | None = None,
    variable: str | None = None,
    mz_bin: str | float | None = None,
    mz_range=None,
    progress: ProgressCallback | None = None,
    client: Any = None,
    pyramid: bool = False,
    storage_options: dict | None = None,
) -> dict:
    """Reorganise a SEG-Y, imzML, HDF5, NetCDF, FITS, SEPlib or ``.npy`` file, or raw bytes, into a cube
    store; returns the summary.

    shape, order, offset: raw bytes (any file given ``shape``): the array's shape, ``"C"`` (last axis
        fastest) or ``"F"``, and where its first byte is; ``dtype`` is then its element type (default
        float32). ``.npy`` files say all that themselves. Both are stored as they are (no conversion).
    hdu: a FITS file's HDU (default: the first with an image).
    dataset: an HDF5 file's dataset, e.g. ``/seismic/volume`` (default: its only N-D numeric one).
    mz_bin, mz_range: for a processed-mode imzML file, the width of the m/z bins (``"10ppm"``, or
        ``0.01`` Da; default chosen from the data and reported) and the range binned (``"100:1000"``;
        default every peak's).
    variable: a NetCDF file's variable (``grp/v`` in a group; default: its only data variable); stored
        with its coordinate variables and raw values with their CF attributes, so xarray decodes the store
        as the file.

    dtype: element type of the amplitudes: ``"float32"`` (default), another
        numpy name, or ``"native"`` for the type that holds the source's
        sample format exactly (int16 for format 3, ...).
    compress: ``"none"`` (default), ``"zstd:3"``, ``"gzip:5"``, ``"blosc-lz4"``,
        ``"blosc-zstd:5,shuffle=bit"``, ``"bitround:12"``, ``"zfp:tolerance=0.01"``,
        ``"zfp:rate=4"``, ``"zfp:precision=16"``, ``"zfp:reversible"``, or an error target
        tuned on a sample of the survey: ``"zfp:snr=40"`` (dB), ``"zfp:max-error=0.5%"``.
        See :data:`cubeslab.compression.COMPRESSION_HELP`.
    max_error: shorthand for ``compress="zfp:max-error=..."``: a bound on every sample's
        error, absolute (``0.5``) or relative to the RMS amplitude (``"0.5%"``).
    layout: how chunk and shard shapes are chosen: ``"auto"`` (the planner's pick for
        ``access`` on this machine's profile), ``"cube:N"``, ``"pyrus-formula"`` (the Pyrus
        study's published chunk-shape formula), ``"AxBxC"`` (chunks) or ``"AxBxC/DxExF"`` (chunks/shards).
    access: reads the layout is planned for (default: every plane), e.g. ``"inline,time=2"``.
    views: orientation copies to write as well, e.g. ``["inline", "crossline", "time"]``:
        each laid out for that access alone; reads go to the copy predicted fastest.
    profile: device profile file (default: the one measured for the store's filesystem,
        else the built-in typical machine).
    memory_limit: bound in bytes on the ingest's buffers (default 1 GiB).
    resume: continue an ingest of the same source with the same options that stopped (crash, Ctrl-C):
        the shards it finished are kept. Without a store there, a fresh ingest starts.
    durable: flush every file of the store to the device (fsync) before marking it complete,
        and the marker after, so a power cut leaves the store incomplete or whole. Off by
        default: the kernel writes back in its own time (as zarr-python and h5py leave it).

    The store is marked complete last; if the ingest stops before, the store
    stays marked incomplete and :func:`cubeslab.open` refuses it.

    client: run a SEG-Y ingest as tasks on a Dask cluster: a ``distributed.Client`` or the scheduler's
        address (``"tcp://host:8786"``). Each task reads a block of traces and writes whole shards; the
        workers must see the source and the store's staging folder at the same paths (a shared
        filesystem). The store is the same, byte for byte, as one ingested here.

    pyramid: then write overview levels (see :func:`cubeslab.pyramid.build_pyramid`), for viewing.

    ``store`` and ``source`` may be on object storage (``s3://bucket/key``), reached with
    ``storage_options`` (fsspec's names: ``key``, ``secret``, ``endpoint_url``, ``region``) or else the
    ``AWS_*`` variables and profiles. A source there is downloaded to a temporary folder first (an imzML
    file with its ``.ibd``).
    """
    arguments = dict(locals())
    if pyramid:
        from .pyramid import build_pyramid

        local_only(store, "writing overview levels")  # refused before the ingest, not after
        summary = ingest(**(arguments | {"pyramid": False}))
        summary["pyramid"] = build_pyramid(store, memory_limit=memory_limit)["cubeslab"]["pyramid"]
        return summary
    # Also refuses a scheme cubeslab does not support; the options are the store's only if it is remote.
    store = store_path(store, storage_options if is_remote(store) else None)
    if is_remote(source):
        with fetched_source(source, storage_options) as copy, named_by_url(copy):
            rest = {k: v for k, v in arguments.items() if k not in ("source", "store", "storage_options")}
            return ingest(copy.path, store, storage_options=storage_options_of(store), **rest)

    if not os.path.lexists(source):  # said as such, before the options are weighed against its kind
        raise StoreNotFoundError(f"{source}: no such file")
    for name, byte in (("inline", inline_byte), ("crossline", crossline_byte), ("offset", offset_byte)):
        if byte is not None and byte < 0:  # the engine checks the rest, but takes no negative number
            raise GeometryError(f"{source}: {name} byte position {byte} is outside the 240-byte trace header")
    if threads is not None and threads < 1:
        raise InvalidInputError(f"threads={threads}: give at least 1")

    # Each option that another kind of source would ignore is refused, not dropped without a word.
    segy_only = {
        "views": bool(views), "resume": resume, "client": client is not None, "profile": profile is not None,
        "threads": threads is not None, "endian": endian != defaults.ENDIAN,
        "inline_byte": inline_byte != defaults.INLINE_BYTE,
        "crossline_byte": crossline_byte != defaults.CROSSLINE_BYTE,
        "offset_byte": offset_byte != defaults.OFFSET_BYTE, "allow_truncated": allow_truncated,
        "sample_interval_us": sample_interval_us is not None, "vertical": vertical != defaults.VERTICAL,
    }  # fmt: skip
    array_only = {
        "shape": shape is not None, "order": order != "C", "offset": offset != 0, "hdu": hdu is not None,
        "dataset": dataset is not None, "variable": variable is not None,
    }  # fmt: skip

    def refuse_options(kind: str, options: dict[str, bool], applies_to: str) -> None:
        for name, given in options.items():
            if given:
                raise OptionError(f"{name} applies to {applies_to}; {source} is {kind}")

    def refuse_segy_options(kind: str) -> None:
        refuse_options(kind, segy_only, "SEG-Y ingest")
        if dtype is not None and shape is None:
            refuse_options(kind, {"dtype": True}, DTYPE_APPLIES_TO)

    def written(done: int, total: int) -> None:
        if progress is not None:
            progress(Phase("write volume", 1, "bytes", done, total))

    remote = is_remote(store)
    if is_imzml(source):
        refuse_options("imzML", segy_only | {"views": False}, "SEG-Y ingest")
        refuse_options("imzML", {"dtype": dtype is not None}, DTYPE_APPLIES_TO)
        refuse_options("imzML", array_only, "array files (raw, HDF5, NetCDF, FITS)")
        with reading(source):
            return ingest_imzml(
                source, store, mz_bin=mz_bin, mz_range=mz_range, overwrite=overwrite, durable=durable,
                layout=layout, access=access, compress=with_max_error(compress, max_error),
                memory_limit=memory_limit, progress=written, views=list(views or []),
            )  # fmt: skip
    if mz_bin is not None or mz_range is not None:
        raise InvalidInputError(f"mz_bin and mz_range apply to imzML files; {source} is not one")
    with reading(source):
        netcdf = (variable is not None and dataset is None) or is_netcdf(source, dataset)
        array = (
            None
            if netcdf
            else array_source(
                source, shape=shape, dtype=dtype, order=order, offset=offset, hdu=hdu, dataset=dataset
            )
        )
        if netcdf or array is not None:
            refuse_segy_options("an N-D array file")
            if netcdf and (hdu is not None or shape is not None):
                raise InvalidInputError(f"{source}: --hdu and --shape are not for NetCDF files")

            common: dict[str, Any] = dict(
                overwrite=overwrite, durable=durable, layout=layout, access=access,
                compress=with_max_error(compress, max_error), memory_limit=memory_limit, progress=written,
            )  # fmt: skip
            if array is not None:
                return ingest_array(array, store, **common)
            return ingest_netcdf(source, store, variable=variable, **common)
    refuse_options("SEG-Y", array_only, "array files (raw, HDF5, NetCDF, FITS)")
    if dtype not in (None, "native"):
        dtype = np.dtype(dtype).name
    source_bytes = os.path.getsize(source) if os.path.isfile(source) else 0
    options = _engine.IngestOptions(
        overwrite=overwrite, resume=resume, durable=durable, dtype=dtype, layout=layout, access=access,
        views=list(views or []), compress=with_max_error(compress, max_error), threads=threads,
        endian=endian, inline_byte=inline_byte, crossline_byte=crossline_byte, offset_byte=offset_byte,
        allow_truncated=allow_truncated, sample_interval_us=sample_interval_us, vertical=vertical,
        memory_limit=None if memory_limit is None else int(memory_limit),
        # A store on object storage is planned for the built-in typical machine unless a profile is given.
        profile=None if remote and profile is None else measure_first(store, profile, source_bytes, progress),
        storage_options=storage_options_of(store),
        origin=None if (origin := source_origin(source)) is None else (origin.url, origin.version),
    )  # fmt: skip
    if client is not None and remote and views:
        # Refused before anything is written; the engine would refuse it after the scan.
        raise InvalidInputError(
            f"{store}: orientation views are not done by an ingest on a cluster to object storage yet; "
            "ingest on one machine (without a client), or to a folder"
        )
    cluster = None if client is None else cluster_ingest.connect(client)
    segy_options = dict(endian=endian, allow_truncated=allow_truncated, sample_interval_us=sample_interval_us)

    def work(handle) -> str:
        job = _engine.Ingest(os.fspath(source), os.fspath(store), options, handle)
        if cluster is not None:
            cluster_ingest.run_on_cluster(
                job, cluster, os.path.abspath(source), segy_options, handle, storage_options_of(store)
            )
        return job.finish()

    try:
        summary = json.loads(run_watched(work, progress))
    finally:
        if cluster is not None and cluster is not client:
            cluster.close()
    for warning in summary.get("warnings", []):
        warnings.warn(naming_sources(warning), IngestWarning, stacklevel=2)
    return summary


def export(
    store: str | os.PathLike,
    output: str | os.PathLike,
    *,
    format: int | None = None,
    overwrite: bool = False,
    threads: int | None = None,
    compress: str | None = None,
) -> int:
    """Write a store out: to SEG-Y (a survey's live traces, inline by inline; returns the number of
    traces), or, when ``output`` ends so, to ``.npy``, SEPlib ``.H``, HDF5 ``.h5``, NetCDF 4 ``.nc`` or
    FITS ``.fits`` (any store; returns the number of elements).

    format: SEG-Y sample format code of the output (default: the source's).
    compress: ``"deflate"`` or ``"deflate:LEVEL"`` for HDF5 and NetCDF (default: none).
    ``store`` may be on object storage: ``.npy`` reads it there; the other formats copy it to a
    temporary folder beside ``output`` first (as much room again as the output).
    An MDIO store's headers are rebuilt as SEG-Y bytes first.
    """
    from . import mdio
    from .sources import export as array_export

    if is_remote(output):
        raise InvalidInputError(f"{output}: exports are written on this machine, not to object storage")
    output = store_path(output)  # file:// URLs too

    suffix = os.path.splitext(os.fspath(output))[1]
    kind = FORMAT_BY_SUFFIX.get(suffix)
    if kind is None and suffix.lower() not in schema.SEGY_SUFFIXES:
        raise InvalidInputError(
            f"{output}: the file's name says no format cubeslab writes; name it "
            f"{', '.join(schema.SEGY_SUFFIXES)} (SEG-Y), or {', '.join(FORMAT_BY_SUFFIX)}"
        )
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise CubeslabIOError(f"{output}: its folder {folder} does not exist")
    if is_remote(store) and kind != "npy":  # .npy reads the store where it is
        with fetched_store(store, beside=output) as local:
            return export(
                local, output, format=format, overwrite=overwrite, threads=threads, compress=compress
            )
    if compress is not None and kind not in ("hdf5", "netcdf"):
        raise OptionError(f"{output}: compress= applies to HDF5 and NetCDF exports only")
    if kind == "npy":
        return array_export.export_npy(store, output, overwrite=overwrite)
    if kind == "seplib":
        return array_export.export_seplib(store, output, overwrite=overwrite)
    if kind == "hdf5":
        return array_export.export_hdf5(store, output, overwrite=overwrite, compress=compress)
    if kind == "netcdf":
        return array_export.export_netcdf(store, output, overwrite=overwrite, compress=compress)
    if kind == "fits":
        return array_export.export_fits(store, output, overwrite=overwrite)
    if mdio.is_mdio_export_source(store):
        exported = mdio.export_segy(store, output, format=format, overwrite=overwrite, threads=threads)
        return said_left_out(store, output, *exported)
    if not schema.is_segy_survey(store_contents(store, to_read=False)):
        raise InvalidInputError(
            f"{store}: SEG-Y export writes a survey ingested from SEG-Y; this store holds an N-D array: "
            f"export it to {', '.join(FORMAT_BY_SUFFIX)}"
        )
    options = _engine.ExportOptions(format=format, overwrite=overwrite, threads=threads)
    return said_left_out(store, output, *_engine.export(os.fspath(store), os.fspath(output), options))


def describe_segy(
    source: str | os.PathLike,
    *,
    endian: str = defaults.ENDIAN,
    inline_byte: int = defaults.INLINE_BYTE,
    crossline_byte: int = defaults.CROSSLINE_BYTE,
    offset_byte: int = defaults.OFFSET_BYTE,
    threads: int | None = None,
) -> dict:
    """What a SEG-Y file holds — headers, sample format, geometry — from a parallel header scan,
    without ingesting it."""
    options = _engine.IngestOptions(
        endian=endian, inline_byte=inline_byte, crossline_byte=crossline_byte, offset_byte=offset_byte,
        threads=threads,
    )  # fmt: skip
    return json.loads(_engine.segy_info(os.fspath(source), options))
