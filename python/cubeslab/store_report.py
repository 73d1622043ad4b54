"""What `cubeslab info` reports of a store: geometry, layout, size, codec and who reads it, the error
of lossy compression (at ingest, and of chunks written since), completeness."""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import _engine
from .compression import store_readers
from .errors import IncompleteStoreError, StoreNotFoundError
from .locations import S3Path, storage_options_of, store_size
from .schema import COMPLETE, CREATED, FOREIGN, store_contents


def store_report(store: Path | S3Path) -> dict:

    try:
        contents = store_contents(store, to_read=False)
    except IncompleteStoreError as unfinished:  # still being written under its staging name
        return {"store": str(store), "state": "incomplete", "hint": str(unfinished)}
    state = contents["state"]
    report: dict = {"store": str(store), "state": state}
    if state not in (COMPLETE, CREATED, FOREIGN):
        report["hint"] = (
            "the ingest did not finish; continue it with --resume, or start again with --overwrite"
        )
        return report
    from . import open as open_cube
    from .mdio import store_notes

    cube = open_cube(store)
    size = store_size(cube.path)
    amplitude = cube.amplitude
    volume = store_size(
        cube.path / Path(amplitude.path).name if contents["node_type"] == "group" else cube.path
    )
    copies = sum(store_size(Path(c)) for c in amplitude.copies)
    report.update(
        {
            "dims": dict(zip(cube.dims, cube.shape, strict=True)),
            "dtype": str(cube.dtype),
            "chunks": list(amplitude.chunks),
            "shards": list(amplitude.shards) if amplitude.shards else None,
            "codecs": [c["name"] for c in amplitude.metadata.get("codecs", [])],
            "readable_by": store_readers(
                array_nodes(cube, contents["node_type"] == "group"), in_group=contents["node_type"] == "group"
            ),
            "size_bytes": size,
            "data_bytes": amplitude.nbytes,
            "volume_bytes": volume,
            # The volume's own ratio; views are copies, counted in their own line below.
            "compression_ratio": round(amplitude.nbytes / volume, 3) if volume else None,
            "ranges": {d: list(ends) for d in cube.dims if (ends := cube.coords.ends(d)) is not None},
        }
    )
    extra = cube.attributes.get("cubeslab", {})
    compression = extra.get("compression")
    if compression:
        codec = compression["codec"]
        if compression["requested"] != codec:
            codec += f" (tuned for {compression['requested']})"
        report["compression"] = codec
        if "achieved" in compression:
            report["error"] = error_summary(compression["achieved"])
    rewrites = amplitude.attributes.get("cubeslab", {}).get("rewrites")
    if rewrites:  # lossy chunks written since the ingest (or creation): their own error
        if "error" in report:
            report["error"] = "at ingest: " + report["error"]
        report["error_of_writes"] = rewrite_summary(rewrites)
    if "plan" in extra:
        report["layout"] = f"{extra['plan']['layout']} ({extra['plan']['strategy']})"
    if copies:
        report["ratio_with_views"] = round(amplitude.nbytes / (volume + copies), 3)
    if extra.get("views"):
        report["views"] = {
            access: f"{view['layout']}, {view['stored_bytes']:,} bytes "
            f"(+{view['stored_bytes'] / max(extra['stored_bytes'], 1):.0%})"
            for access, view in extra["views"].items()
        }
    for key in ("live_traces", "missing_traces", "sorting", "source", "warnings"):
        if key in extra:
            report[key] = extra[key]
    report.update(store_notes(cube))  # MDIO's time axis, where it differs from the SEG-Y's
    return report


def array_nodes(cube, is_group: bool) -> list[dict]:
    """The ``zarr.json`` of every array of the store, all of which a tool must read to open it: found by
    walking a folder; on object storage, which is not listed here, the main array's and those named
    beside it (its dimensions' coordinates, the CF coordinates it lists, a survey's arrays)."""
    if not is_group:
        return [cube.amplitude.metadata]
    if isinstance(cube.path, Path):
        return _arrays_in(cube.path)
    listed = str(cube.amplitude.attributes.get("coordinates", "")).split()
    found = [cube.amplitude.metadata]
    for name in sorted({*cube.dims, *listed, *_engine.survey_arrays().values()}):
        if "/" in name or name in ("", ".", ".."):
            continue
        try:
            node = json.loads(_engine.read_node(str(cube.path / name), storage_options_of(cube.path)))
        except StoreNotFoundError:
            continue
        if isinstance(node, dict) and node.get("node_type") == "array":
            found.append(node)
    return found


def _arrays_in(folder: Path) -> list[dict]:
    """The ``zarr.json`` of every array in a local store, found without walking into an array's chunk
    folders (a large store has many)."""
    found = []
    for root, folders, files in os.walk(folder):
        node = json.loads(Path(root, "zarr.json").read_text()) if "zarr.json" in files else None
        if isinstance(node, dict) and node.get("node_type") == "array":
            found.append(node)
            folders.clear()  # an array holds chunks, no other node
        else:
            folders[:] = sorted(f for f in folders if not f.startswith("."))
    return found


def _size(x: float | None) -> str:
    """A recorded error figure. Non-finite figures are recorded as null: a ratio is infinite for exact
    data, an error for an infinity lost (or a NaN made from a number, as ZFP makes of a NaN)."""
    return "inf" if x is None else f"{x:.4g}"


def rewrite_summary(rewrites: dict) -> str:
    """One line from the error a writer recorded for the lossy chunks it wrote back."""
    text = f"{rewrites['chunks']} chunks written since, max |error| {_size(rewrites['max_abs_error'])}"
    worst = rewrites.get("worst_chunk_snr")
    if worst:
        snr = "-inf dB" if worst["snr_db"] is None else f"{worst['snr_db']:.1f} dB"
        text += f"; worst chunk {worst['chunk']}: SNR {snr}"
    return text


def error_summary(errors: dict) -> str:
    """One line from recorded error statistics (see compress/metrics.rs)."""
    exact = errors["rms_error"] == 0

    def db(x):
        return ("exact" if exact else "-inf dB") if x is None else f"{x:.1f} dB"

    text = (
        f"max |error| {_size(errors['max_abs_error'])}, RMS error {_size(errors['rms_error'])} "
        f"(signal RMS {_size(errors['rms_signal'])}), SNR {db(errors['snr_db'])}, "
        f"PSNR {db(errors['psnr_db'])}"
    )
    worst = errors.get("worst_chunk_snr")
    if worst:
        text += f"; worst chunk {worst['chunk']}: SNR {db(worst['snr_db'])}"
    return text
