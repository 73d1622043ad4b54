"""``cubeslab verify``: every chunk re-read with checksums on; optionally the store against its
source, SEG-Y or an N-D array file (maximum absolute error, RMS error, SNR, PSNR; for SEG-Y per volume
and worst chunk)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import _engine, schema
from .array import Array, ReadSettings
from .errors import CubeslabError, InvalidInputError
from .foreign import recheck_unreadable
from .locations import S3Path, storage_options_of, store_path
from .msi.ingest import is_imzml
from .pyramid import check_pyramid, is_lossy
from .schema import store_contents
from .sources.compare import compare_with_array_file, is_array_file


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
    ``arrays[name]["bad"]``. With ``against`` (the file the store was ingested from: SEG-Y, read with
    the byte order and header bytes the ingest recorded, or an N-D array file, read with the dataset,
    variable, HDU or raw layout it recorded), ``against`` holds the error statistics; a store whose
    compression is lossless must match its source exactly.
    """
    where = store_path(store, storage_options)
    if against is not None and isinstance(where, S3Path):
        raise InvalidInputError(f"{store}: --against compares a store on this machine with its source")
    report = json.loads(_engine.verify_store(os.fspath(where), threads, None, storage_options_of(where)))
    if report.get("unreadable"):  # data types the engine does not read, as MDIO's struct headers
        recheck_unreadable(report)
    if against is not None and not isinstance(where, S3Path):
        if isinstance(store_path(against), S3Path):
            raise InvalidInputError(f"{against}: --against reads a file on this machine; download it first")
        if not os.path.isfile(against):
            raise InvalidInputError(f"{against}: no such file to compare {store} with")
        if is_imzml(against):
            raise InvalidInputError(
                f"{against}: --against reads SEG-Y and N-D array files; an imzML's spectra are binned "
                "or masked on ingest, so its store is checked by reading both (pyimzML's getspectrum)"
            )
        contents = store_contents(where, to_read=False)
        survey = schema.is_segy_survey(contents)
        compare = against_segy if survey and not is_array_file(against) else against_array_file
        report["against"] = compared = compare(where, contents, against, threads, memory_limit)
        if "problem" not in compared and compared.get("max_abs_error", 0) is None:
            # JSON has no infinity: an error beyond every bound (a NaN or infinity read for a number).
            compared["problem"] = (
                "the store holds NaN or infinity where its source has numbers, or the reverse"
            )
        report["ok"] = report["ok"] and "problem" not in compared
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


def against_segy(store: Path, contents: dict, against, threads: int | None, memory_limit: int | None) -> dict:
    """The store's amplitudes against the SEG-Y file it was ingested from, read with the byte order and
    header bytes the ingest recorded. ``contents``: the store's (:func:`schema.store_contents`)."""
    recorded = contents["attributes"].get("cubeslab", {})
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
    errors["lossy"] = lossy = recorded.get("compression", {}).get("lossy", False)
    if not lossy and errors["max_abs_error"] != 0:
        rounded = any(str(w).startswith("samples of format") for w in recorded.get("warnings", []))
        errors["problem"] = "lossless store differs from its source" + (
            ": float32 rounds its samples (ingest with --dtype native to keep them)" if rounded else ""
        )
    return errors


def against_array_file(
    store: Path, contents: dict, against, threads: int | None, memory_limit: int | None
) -> dict:
    """The store's data array against the N-D array file it was ingested from; a lossless store must
    hold every value exactly (NaN where the file has NaN)."""
    is_group = contents["node_type"] == "group"
    data = Array(store / Path(contents["main"]).name if is_group else store, ReadSettings(threads=threads))
    errors = compare_with_array_file(
        store, against, contents["attributes"] if is_group else {}, data, memory_limit
    )
    errors["source"] = os.fspath(against)
    errors["lossy"] = lossy = is_lossy(data)
    if not lossy and errors["differing"]:
        errors["problem"] = f"lossless store differs from its source in {errors['differing']:,} values"
    return errors
