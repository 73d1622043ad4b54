"""``cubeslab verify``: every chunk re-read with checksums on; optionally the store against its
SEG-Y source (maximum absolute error, RMS error, SNR, PSNR, per volume and worst chunk)."""

from __future__ import annotations

import json
import os

from . import _engine
from .errors import CubeslabError, InvalidInputError
from .foreign import recheck_unreadable
from .locations import S3Path, storage_options_of, store_path
from .pyramid import check_pyramid
from .schema import store_contents


def verify(
    store: str | os.PathLike,
    *,
    against: str | os.PathLike | None = None,
    threads: int | None = None,
    memory_limit: int | None = None,
    storage_options: dict | None = None,
) -> dict:
    """Check a store; returns a report whose ``ok`` says whether anything is wrong. A store on object
    storage is reached with ``storage_options`` as :func:`cubeslab.open` takes them.

    Every chunk of every array is read back with its crc32c checked (checksums cannot be
    turned off here); arrays of a data type the engine does not read (MDIO's ``struct`` trace
    headers) are decoded chunk by chunk in Python. A chunk that fails is named in
    ``arrays[name]["bad"]``. With ``against`` (the SEG-Y file the store was ingested from, read
    with the byte order and header bytes the ingest recorded), ``against`` holds the error
    statistics; a store whose compression is lossless must match its source exactly.
    """
    where = store_path(store, storage_options)
    if against is not None and isinstance(where, S3Path):
        raise InvalidInputError(f"{store}: --against compares a store on this machine with its source")
    report = json.loads(_engine.verify_store(os.fspath(where), threads, None, storage_options_of(where)))
    if report.get("unreadable"):  # data types the engine does not read, as MDIO's struct headers
        recheck_unreadable(report)
    if against is not None:
        recorded = store_contents(store, to_read=False)["attributes"].get("cubeslab", {})
        fingerprint = recorded.get("fingerprint", {})
        source_options = _engine.IngestOptions(
            **{
                key: fingerprint[key]
                for key in (
                    "inline_byte",
                    "crossline_byte",
                    "offset_byte",
                    "allow_truncated",
                    "sample_interval_us",
                )
                if fingerprint.get(key) is not None
            },
            endian=fingerprint.get("endianness", "auto"),
            threads=threads,
            memory_limit=None if memory_limit is None else int(memory_limit),
        )
        errors = json.loads(_engine.compare_with_source(os.fspath(store), os.fspath(against), source_options))
        errors["source"] = os.fspath(against)
        lossy = recorded.get("compression", {}).get("lossy", False)
        errors["lossy"] = lossy
        report["against"] = errors
        if not lossy and errors["max_abs_error"] != 0:
            report["ok"] = False
            rounded = any(str(w).startswith("samples of format") for w in recorded.get("warnings", []))
            report["against"]["problem"] = "lossless store differs from its source" + (
                ": float32 rounds its samples (ingest with --dtype native to keep them)" if rounded else ""
            )
    if not isinstance(where, S3Path):
        # Levels are compared only in a store whose arrays all read back; leftovers are named either way,
        # where the store still opens.
        try:
            pyramid = check_pyramid(where, memory_limit, compare=report["ok"])
        except CubeslabError:
            if report["ok"]:
                raise
            pyramid = None
        if pyramid is not None:
            report["pyramid"] = pyramid
            report["ok"] = report["ok"] and not pyramid["problems"]
    return report
