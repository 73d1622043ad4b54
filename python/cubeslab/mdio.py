"""MDIO v1 stores as MDIO writes them: their trace headers by name, their time axis, export.

An MDIO v1 store keeps its trace headers in ``headers``, a Zarr v3 array of the ``struct``
data type (one named field per SEG-Y trace header field, MDIO's names: ``inline``,
``source_coord_x``, ...), and its file headers as attributes of ``segy_file_header``, a
zero-dimensional ``fixed_length_utf32`` array; :mod:`cubeslab.foreign` decodes such arrays.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from . import schema
from .errors import (
    CubeslabIOError,
    InvalidInputError,
    LabelError,
    StoreExistsError,
    StoreNotFoundError,
)
from .foreign import ForeignArray
from .trace_fields import TRACE_FIELDS

MDIO_TRACE_FIELDS: dict[str, tuple[int, int]] = {
    "trace_seq_num_line": (1, 4),
    "trace_seq_num_reel": (5, 4),
    "orig_field_record_num": (9, 4),
    "trace_num_orig_record": (13, 4),
    "energy_source_point_num": (17, 4),
    "ensemble_num": (21, 4),
    "trace_num_ensemble": (25, 4),
    "trace_id_code": (29, 2),
    "vertically_summed_traces": (31, 2),
    "horizontally_stacked_traces": (33, 2),
    "data_use": (35, 2),
    "source_to_receiver_distance": (37, 4),
    "receiver_group_elevation": (41, 4),
    "source_surface_elevation": (45, 4),
    "source_depth_below_surface": (49, 4),
    "receiver_datum_elevation": (53, 4),
    "source_datum_elevation": (57, 4),
    "source_water_depth": (61, 4),
    "receiver_water_depth": (65, 4),
    "elevation_depth_scalar": (69, 2),
    "coordinate_scalar": (71, 2),
    "source_coord_x": (73, 4),
    "source_coord_y": (77, 4),
    "group_coord_x": (81, 4),
    "group_coord_y": (85, 4),
    "coordinate_unit": (89, 2),
    "weathering_velocity": (91, 2),
    "subweathering_velocity": (93, 2),
    "source_uphole_time": (95, 2),
    "group_uphole_time": (97, 2),
    "source_static_correction": (99, 2),
    "receiver_static_correction": (101, 2),
    "total_static_applied": (103, 2),
    "lag_time_a": (105, 2),
    "lag_time_b": (107, 2),
    "delay_recording_time": (109, 2),
    "mute_time_start": (111, 2),
    "mute_time_end": (113, 2),
    "samples_per_trace": (115, 2),
    "sample_interval": (117, 2),
    "instrument_gain_type": (119, 2),
    "instrument_gain_const": (121, 2),
    "instrument_gain_initial": (123, 2),
    "correlated_data": (125, 2),
    "sweep_freq_start": (127, 2),
    "sweep_freq_end": (129, 2),
    "sweep_length": (131, 2),
    "sweep_type": (133, 2),
    "sweep_taper_start": (135, 2),
    "sweep_taper_end": (137, 2),
    "taper_type": (139, 2),
    "alias_filter_freq": (141, 2),
    "alias_filter_slope": (143, 2),
    "notch_filter_freq": (145, 2),
    "notch_filter_slope": (147, 2),
    "low_cut_freq": (149, 2),
    "high_cut_freq": (151, 2),
    "low_cut_slope": (153, 2),
    "high_cut_slope": (155, 2),
    "year_recorded": (157, 2),
    "day_of_year": (159, 2),
    "hour_of_day": (161, 2),
    "minute_of_hour": (163, 2),
    "second_of_minute": (165, 2),
    "time_basis_code": (167, 2),
    "trace_weighting_factor": (169, 2),
    "group_num_roll_switch": (171, 2),
    "group_num_first_trace": (173, 2),
    "group_num_last_trace": (175, 2),
    "gap_size": (177, 2),
    "taper_overtravel": (179, 2),
    "cdp_x": (181, 4),
    "cdp_y": (185, 4),
    "inline": (189, 4),
    "crossline": (193, 4),
    "shot_point": (197, 4),
    "shot_point_scalar": (201, 2),
    "trace_value_unit": (203, 2),
    "transduction_const_mantissa": (205, 4),
    "transduction_const_exponent": (209, 2),
    "transduction_unit": (211, 2),
    "device_trace_id": (213, 2),
    "times_scalar": (215, 2),
    "source_type_orientation": (217, 2),
    "source_energy_dir_mantissa": (219, 4),
    "source_energy_dir_exponent": (223, 2),
    "source_measurement_mantissa": (225, 4),
    "source_measurement_exponent": (229, 2),
    "source_measurement_unit": (231, 2),
    "trace_header_name": (233, 8),
}
"""MDIO's (the ``segy`` package's) SEG-Y rev 0/1/2 trace header field names: (1-based byte, size)."""

MDIO_BINARY_FIELDS: dict[str, tuple[int, int]] = {
    "job_id": (3201, 4),
    "line_num": (3205, 4),
    "reel_num": (3209, 4),
    "data_traces_per_ensemble": (3213, 2),
    "aux_traces_per_ensemble": (3215, 2),
    "sample_interval": (3217, 2),
    "orig_sample_interval": (3219, 2),
    "samples_per_trace": (3221, 2),
    "orig_samples_per_trace": (3223, 2),
    "data_sample_format": (3225, 2),
    "ensemble_fold": (3227, 2),
    "trace_sorting_code": (3229, 2),
    "vertical_sum_code": (3231, 2),
    "sweep_freq_start": (3233, 2),
    "sweep_freq_end": (3235, 2),
    "sweep_length": (3237, 2),
    "sweep_type_code": (3239, 2),
    "sweep_trace_num": (3241, 2),
    "sweep_taper_start": (3243, 2),
    "sweep_taper_end": (3245, 2),
    "taper_type_code": (3247, 2),
    "correlated_data_code": (3249, 2),
    "binary_gain_code": (3251, 2),
    "amp_recovery_code": (3253, 2),
    "measurement_system_code": (3255, 2),
    "impulse_polarity_code": (3257, 2),
    "vibratory_polarity_code": (3259, 2),
    "extended_data_traces_per_ensemble": (3261, 4),
    "extended_aux_traces_per_ensemble": (3265, 4),
    "extended_samples_per_trace": (3269, 4),
    "extended_sample_interval": (3273, 8),  # IEEE float64
    "extended_orig_sample_interval": (3281, 8),  # IEEE float64
    "extended_orig_samples_per_trace": (3289, 4),
    "extended_ensemble_fold": (3293, 4),
    "byte_order": (3297, 4),
    "integer_constant": (3297, 4),
    "segy_revision": (3501, 2),  # rev 1 naming: major and minor in one 16-bit field
    "segy_revision_major": (3501, 1),
    "segy_revision_minor": (3502, 1),
    "fixed_length_trace_flag": (3503, 2),
    "num_extended_text_headers": (3505, 2),
    "max_extended_trace_headers": (3507, 4),
    "time_basis_code": (3511, 2),
    "num_traces": (3513, 8),
    "byte_offset_first_trace": (3521, 8),
    "byte_offset_of_data": (3521, 8),
    "num_data_trailer_stanzas": (3529, 4),
    "num_data_trailers": (3529, 4),
}
"""MDIO's binary header field names (``segy_file_header`` attribute ``binaryHeader``, also cubeslab's
own): (1-based byte in the file, size). Fields of 8 bytes named ``*interval`` are float64."""

_SEGYIO_BY_BYTE = {byte: name for name, (byte, _) in TRACE_FIELDS.items()}


def struct_headers(store: str | os.PathLike) -> ForeignArray | None:
    """MDIO's ``headers`` array of a store, or None if it has none (or keeps cubeslab's ``raw_headers``)."""
    store = Path(store)
    ours = (store / schema.RAW_HEADERS / "zarr.json").is_file()
    if ours or not (store / "headers" / "zarr.json").is_file():
        return None
    array = ForeignArray(store / "headers")
    return array if array.dtype.names else None


def _field_bytes(array: ForeignArray) -> dict[str, tuple[int, int]]:
    """Each field's SEG-Y (byte, size), when its fields are MDIO's standard ones in header order.

    MDIO lets a user move a field (``inline`` read from byte 17, say) without recording where it
    was read from; such a field then sits out of byte order in the struct, and no byte is claimed
    for any field: segyio names and byte numbers are refused rather than mapped to the wrong bytes.
    """
    names = array.dtype.names or ()
    known = [(name, MDIO_TRACE_FIELDS.get(name)) for name in names]
    last = 0
    for name, spec in known:
        if spec is None:
            continue
        byte, size = spec
        if byte <= last or array.dtype[name].itemsize != size:
            return {}
        last = byte + size - 1
    return {name: spec for name, spec in known if spec is not None}


def header_keys(array: ForeignArray) -> list[str]:
    """The segyio ``TraceField`` names that map onto the store's fields, then MDIO's own names."""
    by_byte = {byte: size for byte, size in _field_bytes(array).values()}
    segyio = [name for name, (byte, size) in TRACE_FIELDS.items() if by_byte.get(byte) == size]
    return [*segyio, *(array.dtype.names or ())]


def header_field(array: ForeignArray, key: str | int) -> np.ndarray:
    """One trace header field over the trace dimensions, by MDIO field name, segyio ``TraceField``
    name or 1-based byte; integers of up to 4 bytes come back as int32 (as segyio gives them)."""
    names = array.dtype.names or ()
    if isinstance(key, str) and key in names:
        field = key
    else:
        if isinstance(key, str):
            if key not in TRACE_FIELDS:
                raise LabelError(
                    f"unknown trace header field {key!r}: this MDIO store's fields are {', '.join(names)}; "
                    "segyio's names (cubeslab.trace_fields.TRACE_FIELDS) also work"
                )
            byte, size = TRACE_FIELDS[key]
        else:
            byte = int(key)
            if byte not in _SEGYIO_BY_BYTE:
                raise LabelError(f"no trace header field starts at byte {key}")
            size = TRACE_FIELDS[_SEGYIO_BY_BYTE[byte]][1]
        fields = _field_bytes(array)
        if not fields:
            raise LabelError(
                f"{array.path}: its header fields are not MDIO's standard SEG-Y layout, so which bytes "
                f"each holds is unknown: ask for a field by its MDIO name ({', '.join(names)})"
            )
        matches = [name for name, spec in fields.items() if spec == (byte, size)]
        if not matches:
            raise LabelError(
                f"{array.path}: MDIO did not keep trace header bytes {byte}-{byte + size - 1} ({key!r})"
            )
        field = matches[0]
    values = array.read(field)
    kind, size = values.dtype.kind, values.dtype.itemsize
    if (kind == "i" and size <= 4) or (kind in "ub" and size < 4):
        return values.astype(np.int32)
    return values.astype(values.dtype.newbyteorder("="))


# -- verify ------------------------------------------------------------------------------------------


def _is_mdio(store: Path) -> bool:
    try:
        attributes = json.loads((store / "zarr.json").read_bytes()).get("attributes", {})
    except (OSError, ValueError):
        return False
    return isinstance(attributes, dict) and "apiVersion" in attributes and "cubeslab" not in attributes


def store_notes(cube) -> dict:
    """Notes ``cubeslab info`` adds for an MDIO store: where its time axis starts against the
    traces' delay recording time (SEG-Y bytes 109-110, scaled by bytes 215-216), where segyio and
    cubeslab start it."""
    store = Path(cube.path)
    if not _is_mdio(store) or cube.ndim < 2 or not len(cube.coords[cube.vertical]):
        return {}
    try:
        headers = struct_headers(store)
        if headers is None:
            return {}
        delay = header_field(headers, "DelayRecordingTime").astype(np.float64)
        scalar = header_field(headers, "ScalarTraceHeader")
    except Exception:
        return {}
    delay = np.where(scalar > 0, delay * scalar, np.where(scalar < 0, delay / np.maximum(-scalar, 1), delay))
    live = cube.trace_mask
    delays = np.unique(delay[live]) if live.shape == delay.shape else np.unique(delay)
    first = float(cube.coords[cube.vertical][0])
    if delays.size == 0 or np.allclose(delays, first):
        return {}
    unit = "ms" if cube.vertical == "time" else "m"
    said = f"{delays[0]:g} {unit}" if delays.size == 1 else f"{delays.min():g}..{delays.max():g} {unit}"
    return {
        "note": f"MDIO wrote the {cube.vertical} axis from {first:g} {unit}; the traces' delay recording "
        f"time (trace header bytes 109-110) is {said}, where segyio and cubeslab start it: add "
        f"{said} to this store's {cube.vertical} values to get the SEG-Y sample times"
    }


# -- export ------------------------------------------------------------------------------------------


def text_header_bytes(text: str) -> bytes:
    """MDIO's ``textHeader`` (lines joined by newlines) as the 3200 EBCDIC bytes of a SEG-Y file."""
    lines = text.split("\n") if "\n" in text else [text[i : i + 80] for i in range(0, len(text), 80)]
    lines = [line.ljust(80)[:80] for line in lines[:40]]
    lines += [" " * 80] * (40 - len(lines))
    return "".join(lines).encode("cp037", errors="replace")


def binary_header_bytes(fields: dict) -> bytes:
    """The 400-byte big-endian binary header from MDIO's ``binaryHeader`` field names and values."""
    out = bytearray(400)
    for name, value in fields.items():
        if name not in MDIO_BINARY_FIELDS or value is None:
            continue
        byte, size = MDIO_BINARY_FIELDS[name]
        if size == 8 and name.endswith("interval"):
            data = np.array(value, dtype=">f8").tobytes()
        else:
            data = int(value).to_bytes(size, "big", signed=int(value) < 0)
        out[byte - 3201 : byte - 3201 + size] = data
    return bytes(out)


def trace_header_bytes(array: ForeignArray) -> np.ndarray:
    """The 240-byte big-endian SEG-Y trace headers, (trace dims..., 240) uint8, from MDIO's struct."""
    fields = _field_bytes(array)
    if not fields:
        raise InvalidInputError(
            f"{array.path}: its header fields are not MDIO's standard SEG-Y layout, so which bytes "
            "each came from is unknown"
        )
    data = array.read()
    out = np.zeros((*array.shape, 240), dtype=np.uint8)
    for name, (byte, size) in fields.items():
        values = data[name]
        if values.dtype.kind in "iuf":
            values = values.astype(values.dtype.newbyteorder(">"))
        out[..., byte - 1 : byte - 1 + size] = (
            np.ascontiguousarray(values).view(np.uint8).reshape((*array.shape, size))
        )
    return out


def is_mdio_export_source(store: str | os.PathLike) -> bool:
    """Whether ``export`` must build the SEG-Y headers of ``store`` here: an MDIO store (``struct``
    trace headers, named binary header fields) rather than one cubeslab wrote."""
    store = Path(store)
    return struct_headers(store) is not None and not (store / schema.RAW_HEADERS / "zarr.json").is_file()


def export_segy(
    store: str | os.PathLike,
    output: str | os.PathLike,
    *,
    format: int | None = None,
    overwrite: bool = False,
    threads: int | None = None,
) -> tuple[int, int, list[int] | None]:
    """Export an MDIO store to SEG-Y with the engine's writer; returns what the engine's export returns.

    The engine writes SEG-Y from cubeslab's own layout (raw 240-byte trace headers, the file headers
    as bytes). This builds that layout for an MDIO store in a scratch folder beside ``output``:
    the trace headers from MDIO's struct fields (big-endian, at their SEG-Y bytes), the textual
    header (EBCDIC) and binary header from ``segy_file_header``'s attributes, and links to the
    store's amplitude and trace mask; then hands it to the engine. Memory: about 500 bytes per trace.
    """
    from . import _engine
    from .array import Array

    store, output = Path(store), Path(output)
    if output.exists() and not overwrite:
        raise StoreExistsError(f"{output} already exists; pass overwrite (--overwrite) to replace it")
    headers = struct_headers(store)
    if headers is None:
        raise StoreNotFoundError(f"{store}: no MDIO trace headers (headers array) to export")
    main = Path(schema.store_contents(store, to_read=False)["main"])
    holder = store / schema.FILE_HEADER / "zarr.json"
    attributes = json.loads(holder.read_bytes()).get("attributes", {}) if holder.is_file() else {}
    binary = attributes.get("binaryHeader")
    if not isinstance(binary, dict) or "data_sample_format" not in binary:
        raise InvalidInputError(f"{holder}: attribute binaryHeader is missing or has no data_sample_format")
    raw = trace_header_bytes(headers)

    try:
        scratch = Path(tempfile.mkdtemp(prefix=".cubeslab-export-", dir=output.absolute().parent))
    except OSError as error:
        raise CubeslabIOError(f"{output}: cannot write beside it: {error.strerror or error}") from None
    try:
        (scratch / "zarr.json").write_text(json.dumps({"zarr_format": 3, "node_type": "group"}))
        (scratch / schema.AMPLITUDE).symlink_to(main.absolute(), target_is_directory=True)
        mask = schema.TRACE_MASK
        if (store / mask / "zarr.json").is_file():
            (scratch / mask).symlink_to((store / mask).absolute(), target_is_directory=True)
        else:
            Array.from_numpy(scratch / mask, np.ones(headers.shape, bool), chunks=headers.shape)
        per_line = max(1, (8 << 20) // max(1, raw[0].nbytes))
        chunks = (min(per_line, raw.shape[0]), *raw.shape[1:])
        Array.from_numpy(scratch / schema.RAW_HEADERS, raw, chunks=chunks)
        Array.create(
            scratch / schema.FILE_HEADER,
            (),
            "uint8",
            chunks=(),
            attributes={
                "rawTextHeaderHex": text_header_bytes(str(attributes.get("textHeader", ""))).hex(),
                "rawBinaryHeaderHex": binary_header_bytes(binary).hex(),
                "endianness": "big",
                "sampleFormat": int(binary["data_sample_format"]),
            },
        )
        options = _engine.ExportOptions(format=format, overwrite=overwrite, threads=threads)
        return _engine.export(os.fspath(scratch), os.fspath(output), options)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
