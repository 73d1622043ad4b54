"""SEG-Y ⇄ cube store: `ingest` and `export`, thin drivers of the engine."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

import numpy as np

from . import _engine
from .codecs import with_max_error
from .errors import CubeslabError, InvalidInputError

ProgressCallback = Callable[[int, int], None]
"""Called as ``progress(bytes_read, total_bytes)`` between steps."""


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
    layout: str = "auto",
    access: str | None = None,
    views: Sequence[str] | None = None,
    profile: str | os.PathLike | None = None,
    memory_limit: int | None = None,
    threads: int | None = None,
    endian: str = "auto",
    inline_byte: int = 189,
    crossline_byte: int = 193,
    offset_byte: int = 37,
    allow_truncated: bool = False,
    sample_interval_us: float | None = None,
    vertical: str = "time",
    progress: ProgressCallback | None = None,
) -> dict:
    """Reorganise a SEG-Y file into a cube store; returns the ingest summary.

    dtype: element type of the amplitudes: ``"float32"`` (default), another
        numpy name, or ``"native"`` for the type that holds the source's
        sample format exactly (int16 for format 3, ...).
    compress: ``"none"`` (default), ``"zstd:3"``, ``"gzip:5"``, ``"blosc-lz4"``,
        ``"blosc-zstd:5,shuffle=bit"``, ``"bitround:12"``, ``"zfp:tolerance=0.01"``,
        ``"zfp:rate=4"``, ``"zfp:precision=16"``, ``"zfp:reversible"``, or an error target
        tuned on a sample of the survey: ``"zfp:snr=40"`` (dB), ``"zfp:max-error=0.5%"``.
        See :data:`cubeslab.codecs.COMPRESSION_HELP`.
    max_error: shorthand for ``compress="zfp:max-error=..."``: a bound on every sample's
        error, absolute (``0.5``) or relative to the RMS amplitude (``"0.5%"``).
    layout: how chunk and shard shapes are chosen: ``"auto"`` (the planner's pick for
        ``access`` on this machine's profile), ``"cube:N"``, ``"reference-001"`` (reference
        001's published formula), ``"AxBxC"`` (chunks) or ``"AxBxC/DxExF"`` (chunks/shards).
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
    """
    from .plan import find_profile

    if dtype not in (None, "native"):
        dtype = np.dtype(dtype).name
    compress = with_max_error(compress, max_error)
    options = {
        "overwrite": overwrite,
        "resume": resume,
        "durable": durable,
        "dtype": dtype,
        "layout": layout,
        "access": access,
        "views": list(views or []),
        "compress": compress,
        "threads": threads,
        "endian": endian,
        "inline_byte": inline_byte,
        "crossline_byte": crossline_byte,
        "offset_byte": offset_byte,
        "allow_truncated": allow_truncated,
        "sample_interval_us": sample_interval_us,
        "vertical": vertical,
    }
    if memory_limit is not None:
        options["memory_limit"] = int(memory_limit)
    profile_text = find_profile(store, profile)
    if profile_text is not None:
        options["profile"] = profile_text
    try:
        job = _engine.Ingest(os.fspath(source), os.fspath(store), json.dumps(options))
    except CubeslabError:
        raise
    except ValueError as error:  # an option the engine cannot parse
        raise InvalidInputError(str(error)) from None
    step = 2 * (threads or _engine.default_parallelism()[0])
    while True:
        left = job.step(step)
        if progress is not None:
            progress(job.bytes_read, job.total_bytes)
        if left == 0:
            break
    return json.loads(job.finish())


def export(
    store: str | os.PathLike,
    output: str | os.PathLike,
    *,
    format: int | None = None,
    overwrite: bool = False,
    threads: int | None = None,
) -> int:
    """Write a survey store back to SEG-Y (its live traces, inline by inline).

    format: SEG-Y sample format code of the output (default: the source's).
    Returns the number of traces written.
    """
    options = {"format": format, "overwrite": overwrite, "threads": threads}
    return _engine.export(os.fspath(store), os.fspath(output), json.dumps(options))


def describe_segy(
    source: str | os.PathLike,
    *,
    endian: str = "auto",
    inline_byte: int = 189,
    crossline_byte: int = 193,
    offset_byte: int = 37,
    threads: int | None = None,
) -> dict:
    """What a SEG-Y file holds — headers, sample format, geometry — from a parallel header scan,
    without ingesting it."""
    options = {
        "endian": endian,
        "inline_byte": inline_byte,
        "crossline_byte": crossline_byte,
        "offset_byte": offset_byte,
        "threads": threads,
    }
    return json.loads(_engine.segy_info(os.fspath(source), json.dumps(options)))
