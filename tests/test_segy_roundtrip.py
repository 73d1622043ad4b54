"""Acceptance: every structured SEG-Y file of tests/data/segy round-trips exactly, with segyio as the
oracle (and a numpy decode of the raw bytes for the 24-bit formats 7 and 15 that segyio cannot read).

For each file: every inline, crossline and time slice; the float32 default and the exact native dtype;
the coordinates; every trace header field; the scaled CDP coordinates; the textual and binary headers;
and export back to SEG-Y (byte for byte, and through segyio). Files without inline/crossline geometry
(shot-gather.sgy, small.su) must be refused with a clear error.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import segyio
from conftest import IRREGULAR, RAW_DECODED_FORMATS, SEGY_CASES, SEGY_DIR, UNSTRUCTURED, decode_24bit

import cubeslab
from cubeslab.trace_fields import TRACE_FIELDS

# The SEG-Y standard's sample formats and the numpy types that hold them exactly (rev 2.0, table 1):
# the oracle for dtype="native".
NATIVE_DTYPES = {
    1: "float32",  # IBM float
    2: "int32",
    3: "int16",
    4: "float32",  # obsolete fixed point; the test files hold IEEE floats, as segyio reads them
    5: "float32",
    6: "float64",
    7: "int32",  # 24-bit two's complement
    8: "int8",
    9: "int64",
    10: "uint32",
    11: "uint16",
    12: "uint64",
    15: "uint32",  # 24-bit unsigned
    16: "uint8",
}

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # segyio: "Unknown trace value format"

# cubeslab's binary header names (MDIO's) -> 1-based byte; segyio's BinField values are those bytes.
BINARY_FIELD_BYTES = {
    "job_id": 3201,
    "line_num": 3205,
    "reel_num": 3209,
    "data_traces_per_ensemble": 3213,
    "aux_traces_per_ensemble": 3215,
    "sample_interval": 3217,
    "orig_sample_interval": 3219,
    "samples_per_trace": 3221,
    "orig_samples_per_trace": 3223,
    "data_sample_format": 3225,
    "ensemble_fold": 3227,
    "trace_sorting_code": 3229,
    "measurement_system_code": 3255,
    "fixed_length_trace_flag": 3503,
    "num_extended_text_headers": 3505,
}


def open_segyio(path, endian, regular=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return segyio.open(path, endian=endian, ignore_geometry=not regular)


def segyio_decodes(case) -> bool:
    """segyio's own plane readers give the true values (not for the 24-bit formats)."""
    return case.regular and case.format_code not in RAW_DECODED_FORMATS


def scale(values: np.ndarray, scalar: np.ndarray) -> np.ndarray:
    """SEG-Y coordinate scalar: positive multiplies, negative divides, zero means one."""
    values = values.astype(np.float64)
    scalar = scalar.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # np.where evaluates every branch
        return np.where(scalar > 0, values * scalar, np.where(scalar < 0, values / np.abs(scalar), values))


def text_oracle(raw: bytes) -> str:
    """The textual header as cubeslab documents it: code page 037 (or ASCII when the header is ASCII),
    anything that is not printable ASCII as a space, 40 lines of 80 columns joined by newlines."""
    ebcdic = raw[:1].decode("cp037") == "C"
    text = raw.decode("cp037") if ebcdic else raw.decode("latin-1")
    text = "".join(c if " " <= c <= "~" else " " for c in text)
    return "\n".join(text[i : i + 80] for i in range(0, len(text), 80))


# -- the data set is all there ---------------------------------------------------------------------


def test_shared_data_holds_the_files_this_suite_is_about():
    names = {c.name for c in SEGY_CASES}
    multiformat = {n for n in names if n.startswith("multiformats/")}
    assert len(multiformat) == 28, sorted(multiformat)
    for code in NATIVE_DTYPES:
        assert {f"multiformats/Format{code}msb.sgy", f"multiformats/Format{code}lsb.sgy"} <= multiformat
    for name in (
        "f3.sgy",
        "f3-lsb.sgy",
        "small.sgy",
        "small-lsb.sgy",
        "small-ps.sgy",
        "delay-scalar.sgy",
        *IRREGULAR,
    ):
        assert name in names
    for name in UNSTRUCTURED:
        assert (SEGY_DIR / name).is_file()


# -- amplitudes ------------------------------------------------------------------------------------


def test_float32_cube_equals_oracle_cast_to_float32(segy_case, ingested, oracle_of):
    ref = oracle_of(segy_case)
    cube = cubeslab.open(ingested(segy_case))
    assert cube.dtype == np.float32
    assert cube.shape == ref.cube.shape
    assert np.array_equal(cube[...], ref.cube.astype(np.float32), equal_nan=True)
    assert not np.all(ref.cube[ref.mask] == 0), "oracle is all zeros: the comparison would prove nothing"


def test_native_dtype_is_the_formats_type_and_values_are_exact(segy_case, ingested, oracle_of):
    ref = oracle_of(segy_case)
    cube = cubeslab.open(ingested(segy_case, dtype="native"))
    assert cube.dtype == ref.dtype
    assert cube.dtype == np.dtype(NATIVE_DTYPES[segy_case.format_code])
    got = cube[...]
    assert np.array_equal(got[ref.mask], ref.cube[ref.mask])
    # the oracle's values fit the native type exactly (nothing was clipped on either side)
    assert np.array_equal(ref.cube[ref.mask].astype(ref.dtype), ref.cube[ref.mask])


def test_every_inline_crossline_and_time_slice_equals_segyio(segy_case, ingested, oracle_of):
    ref = oracle_of(segy_case)
    cube = cubeslab.open(ingested(segy_case))
    expected = ref.cube.astype(np.float32)
    if segyio_decodes(segy_case):
        # segyio's own plane readers, independent of the trace-placing oracle
        with open_segyio(segy_case.path, segy_case.endian) as f:
            for i, il in enumerate(f.ilines):
                if ref.offsets is None:
                    assert np.array_equal(cube.inline[il], f.iline[il].astype(np.float32)), f"inline {il}"
                else:
                    for k, off in enumerate(f.offsets):
                        assert np.array_equal(cube.inline[il][:, k], f.iline[il, off].astype(np.float32))
                assert np.array_equal(cube.inline[il], expected[i])
            for j, xl in enumerate(f.xlines):
                if ref.offsets is None:
                    assert np.array_equal(cube.crossline[xl], f.xline[xl].astype(np.float32)), f"xline {xl}"
                else:
                    for k, off in enumerate(f.offsets):
                        assert np.array_equal(cube.crossline[xl][:, k], f.xline[xl, off].astype(np.float32))
                assert np.array_equal(cube.crossline[xl], expected[:, j])
            for k, t in enumerate(f.samples):
                if ref.offsets is None:
                    assert np.array_equal(cube.time_slice[t], f.depth_slice[k].astype(np.float32)), f"t={t}"
                assert np.array_equal(cube.time_slice[t], expected[..., k])
    else:
        for i, il in enumerate(ref.ilines):
            assert np.array_equal(cube.inline[il], expected[i], equal_nan=True), f"inline {il}"
        for j, xl in enumerate(ref.xlines):
            assert np.array_equal(cube.crossline[xl], expected[:, j], equal_nan=True), f"crossline {xl}"
        for k, t in enumerate(ref.samples):
            assert np.array_equal(cube.time_slice[t], expected[..., k], equal_nan=True), f"time {t}"


def test_every_trace_by_labels_equals_the_segyio_trace(segy_case, ingested, oracle_of):
    ref = oracle_of(segy_case)
    cube = cubeslab.open(ingested(segy_case, dtype="native"))
    il, xl, off = ref.headers["INLINE_3D"], ref.headers["CROSSLINE_3D"], ref.headers["offset"]
    for i, trace in enumerate(ref.traces):
        labels = (il[i], xl[i]) if ref.offsets is None else (il[i], xl[i], off[i])
        assert np.array_equal(cube.trace(*labels), trace), f"trace {i} at {labels}"


def test_trace_mask_is_false_exactly_where_no_trace_is(segy_case, ingested, oracle_of):
    ref = oracle_of(segy_case)
    cube = cubeslab.open(ingested(segy_case))
    assert np.array_equal(cube.trace_mask, ref.mask)
    # missing cells read as NaN (the float32 fill), live cells never do (these files hold no NaN)
    data = cube[...]
    assert np.isnan(data[~ref.mask]).all()
    assert not np.isnan(data[ref.mask]).any()
    assert cube.attributes["cubeslab"]["missing_traces"] == int((~ref.mask).sum())
    assert cube.attributes["cubeslab"]["live_traces"] == len(ref.traces)


@pytest.mark.parametrize("name", IRREGULAR)
def test_irregular_files_have_holes_and_segyio_refuses_their_geometry(name, segy_dir, ingest_cube):
    """The premise of the trace-by-trace comparison: segyio cannot build these cubes; cubeslab can."""
    path = segy_dir / name
    with pytest.raises((RuntimeError, ValueError)), segyio.open(path):
        pass
    cube = ingest_cube(path)
    assert (~cube.trace_mask).sum() >= 1
    with open_segyio(path, "big", regular=False) as f:
        missing_cells = cube.trace_mask.size - f.tracecount
    assert (~cube.trace_mask).sum() == missing_cells
    il, xl = np.argwhere(~cube.trace_mask)[0]
    assert np.isnan(cube.trace(cube.coords["inline"][il], cube.coords["crossline"][xl])).all()


def test_prestack_gathers_equal_segyio_gathers(segy_dir, ingest_cube):
    path = segy_dir / "small-ps.sgy"
    cube = ingest_cube(path)
    assert cube.dims == ["inline", "crossline", "offset", "time"]
    with segyio.open(path) as f:
        assert len(f.offsets) > 1
        assert np.array_equal(cube.coords["offset"], f.offsets)
        assert cube.shape == (len(f.ilines), len(f.xlines), len(f.offsets), len(f.samples))
        for il in f.ilines:
            for xl in f.xlines:
                assert np.array_equal(cube.trace(il, xl), f.gather[il, xl, :]), (il, xl)
        assert np.array_equal(cube[...], segyio.tools.cube(f))


# -- coordinates and headers -----------------------------------------------------------------------


def test_coordinates_equal_segyio(segy_case, ingested, oracle_of):
    ref = oracle_of(segy_case)
    cube = cubeslab.open(ingested(segy_case))
    expected_dims = ["inline", "crossline"] + (["offset"] if ref.offsets is not None else []) + ["time"]
    assert cube.dims == expected_dims
    assert np.array_equal(cube.coords["inline"], ref.ilines)
    assert np.array_equal(cube.coords["crossline"], ref.xlines)
    assert np.array_equal(cube.coords["time"], ref.samples)
    if ref.offsets is not None:
        assert np.array_equal(cube.coords["offset"], ref.offsets)
    if segy_case.regular:
        with open_segyio(segy_case.path, segy_case.endian) as f:
            assert np.array_equal(cube.coords["inline"], f.ilines)
            assert np.array_equal(cube.coords["crossline"], f.xlines)
            assert np.array_equal(cube.coords["time"], f.samples)


def test_delay_recording_time_is_scaled_into_the_time_axis(segy_dir, ingest_cube):
    """delay-scalar.sgy: one trace, delay 10000 with scalar -10 -> the first sample is at 1000 ms."""
    path = segy_dir / "delay-scalar.sgy"
    with segyio.open(path) as f:  # a 1 x 1 survey that segyio opens with geometry
        assert (len(f.ilines), len(f.xlines), f.tracecount) == (1, 1, 1)
        samples = np.asarray(f.samples)
        h = f.header[0]
        delay, scalar = h[segyio.TraceField.DelayRecordingTime], h[segyio.TraceField.ScalarTraceHeader]
        trace = f.trace[0]
    assert delay != 0 and scalar < 0  # the premise: a scaled, non-zero delay
    cube = ingest_cube(path)
    assert cube.shape == (1, 1, len(samples))
    assert np.array_equal(cube.coords["time"], samples)
    assert cube.coords["time"][0] == delay / -scalar
    assert cube.time_slice[samples[3]][0, 0] == trace[3]


def test_every_trace_header_field_equals_segyio(segy_case, ingested, oracle_of):
    ref = oracle_of(segy_case)
    cube = cubeslab.open(ingested(segy_case))
    cells = tuple(np.array(ref.cells).T)
    assert len(TRACE_FIELDS) == 91
    for name in TRACE_FIELDS:
        got = cube.headers[name]
        assert got.shape == ref.mask.shape, name
        assert np.array_equal(got[cells], ref.headers[name]), name
    # also by byte position
    assert np.array_equal(cube.headers[181][cells], ref.headers["CDP_X"])
    assert np.array_equal(cube.headers[189][cells], ref.headers["INLINE_3D"])


def test_cdp_coordinates_are_scaled_by_the_coordinate_scalar(segy_case, ingested, oracle_of):
    ref = oracle_of(segy_case)
    cube = cubeslab.open(ingested(segy_case))
    cells = tuple(np.array(ref.cells).T)
    scalar = ref.headers["SourceGroupScalar"]
    assert np.array_equal(cube.headers["cdp_x"][cells], scale(ref.headers["CDP_X"], scalar))
    assert np.array_equal(cube.headers["cdp_y"][cells], scale(ref.headers["CDP_Y"], scalar))
    assert np.isnan(cube.headers["cdp_x"][~ref.mask]).all()


def test_text_header_is_the_code_page_037_decoding_of_the_raw_bytes(segy_case, ingested):
    raw = segy_case.path.read_bytes()[:3200]
    cube = cubeslab.open(ingested(segy_case))
    assert cube.text_header == text_oracle(raw)
    lines = cube.text_header.split("\n")
    assert len(lines) == 40 and all(len(line) == 80 for line in lines)


def test_text_header_agrees_with_segyio_on_letters_digits_and_spaces(segy_case, ingested):
    """segyio decodes every textual header as EBCDIC with its own table: it agrees with code page 037
    on letters, digits and spaces but not on some punctuation (0x4A, 0x4F, 0x5A, 0x5F, 0x6A, 0xB0,
    0xBA, 0xBB) or control bytes, which it keeps; ASCII headers it garbles (documented difference)."""
    raw = segy_case.path.read_bytes()[:3200]
    if raw[:1].decode("cp037") != "C":
        pytest.skip("ASCII textual header: segyio decodes it as EBCDIC, giving no usable answer")
    with open_segyio(segy_case.path, segy_case.endian, segy_case.regular) as f:
        theirs = bytes(f.text[0]).decode("latin-1")
    ours = cubeslab.open(ingested(segy_case)).text_header.replace("\n", "")
    assert len(ours) == len(theirs) == 3200
    compared = [i for i, c in enumerate(theirs) if c.isascii() and (c.isalnum() or c == " ")]
    assert len(compared) > 1000
    assert [ours[i] for i in compared] == [theirs[i] for i in compared]


def test_binary_header_fields_equal_segyio(segy_case, ingested):
    cube = cubeslab.open(ingested(segy_case))
    with open_segyio(segy_case.path, segy_case.endian, segy_case.regular) as f:
        for name, byte in BINARY_FIELD_BYTES.items():
            assert cube.binary_header[name] == f.bin[segyio.BinField(byte)], name


def test_binary_header_revision_is_one_byte_major_and_one_byte_minor(segy_case, ingested):
    """SEG-Y rev 2: bytes 3501 and 3502 are one unsigned byte each, whatever the byte order. (segyio
    reads them as one 16-bit word in the file's byte order, so it differs on little-endian files.)"""
    raw = segy_case.path.read_bytes()
    header = cubeslab.open(ingested(segy_case)).binary_header
    assert (header["segy_revision_major"], header["segy_revision_minor"]) == (raw[3500], raw[3501])


# -- export ----------------------------------------------------------------------------------------


def test_export_of_native_store_is_byte_identical_to_the_source(segy_case, ingested, tmp_path):
    out = tmp_path / "out.sgy"
    n = cubeslab.export(ingested(segy_case, dtype="native"), out)
    source = segy_case.path.read_bytes()
    exported = out.read_bytes()
    assert len(exported) == len(source)
    first = next((i for i, (a, b) in enumerate(zip(source, exported, strict=True)) if a != b), None)
    assert first is None, f"first differing byte at offset {first}"
    with open_segyio(segy_case.path, segy_case.endian, regular=False) as f:
        assert n == f.tracecount


def test_export_reads_back_in_segyio_like_the_source(segy_case, ingested, tmp_path):
    out = tmp_path / "out.sgy"
    cubeslab.export(ingested(segy_case, dtype="native"), out)
    with (
        open_segyio(segy_case.path, segy_case.endian, segy_case.regular) as src,
        open_segyio(out, segy_case.endian, segy_case.regular) as dst,
    ):
        assert dst.tracecount == src.tracecount
        assert dst.bin[segyio.BinField.Format] == src.bin[segyio.BinField.Format]
        assert np.array_equal(dst.samples, src.samples)
        assert bytes(dst.text[0]) == bytes(src.text[0])
        assert dict(dst.bin) == dict(src.bin)
        for i in range(src.tracecount):
            assert dict(dst.header[i]) == dict(src.header[i]), f"header of trace {i}"
        code = segy_case.format_code
        if code in RAW_DECODED_FORMATS:  # segyio misreads 24-bit samples: decode both files with numpy
            signed = RAW_DECODED_FORMATS[code]
            exported = decode_24bit(out, segy_case.endian, signed)
            assert np.array_equal(exported, decode_24bit(segy_case.path, segy_case.endian, signed))
        else:
            assert np.array_equal(dst.trace.raw[:], src.trace.raw[:])
        if segy_case.regular:
            assert np.array_equal(dst.ilines, src.ilines)
            assert np.array_equal(dst.xlines, src.xlines)


def test_values_written_where_the_survey_has_no_trace_are_said_to_be_left_out_of_a_segy_export(
    segy_dir, ingest_cube, tmp_path
):
    cube = ingest_cube(segy_dir / "small_hole.sgy")
    with warnings.catch_warnings():
        warnings.simplefilter("error", cubeslab.ExportWarning)  # the holes' fill values are no writes
        cubeslab.export(cube.path, tmp_path / "before.sgy")
    holes = np.argwhere(~cube.trace_mask)
    il, xl = holes[-1]
    with cubeslab.open(cube.path, "r+") as writable:
        writable[il, xl, :] = 42.0
        writable[0, 0, :] = 7.0  # a trace the survey has: exported with its header
    where = f"inline {cube.coords['inline'][il]}, crossline {cube.coords['crossline'][xl]}"
    with pytest.warns(cubeslab.ExportWarning, match=f"1 trace position.* the first at {where};"):
        written = cubeslab.export(cube.path, tmp_path / "after.sgy")
    with segyio.open(segy_dir / "small_hole.sgy", ignore_geometry=True) as src:
        assert written == src.tracecount
    with segyio.open(tmp_path / "after.sgy", ignore_geometry=True) as dst:
        first = [i for i in range(dst.tracecount) if dst.header[i][189] == cube.coords["inline"][0]
                 and dst.header[i][193] == cube.coords["crossline"][0]]  # fmt: skip
        np.testing.assert_array_equal(dst.trace[first[0]], np.full(cube.shape[-1], 7.0, "f4"))


def test_export_of_float32_store_is_exact_when_float32_holds_the_values(
    segy_case, ingested, oracle_of, tmp_path
):
    ref = oracle_of(segy_case)
    live = ref.cube[ref.mask]
    with np.errstate(invalid="ignore"):  # float32 values beyond the integer type's range
        exact = np.array_equal(live.astype(np.float32).astype(live.dtype), live)
    if not exact:
        pytest.skip(
            f"float32 does not hold format {segy_case.format_code}'s values exactly (lossy by design)"
        )
    out = tmp_path / "out.sgy"
    cubeslab.export(ingested(segy_case), out)
    assert out.read_bytes() == segy_case.path.read_bytes()


def test_export_to_ieee_float_reads_in_segyio_as_the_float32_cube(segy_dir, ingest_cube, tmp_path):
    cube = ingest_cube(segy_dir / "f3.sgy")
    out = tmp_path / "f3-ieee.sgy"
    assert cubeslab.export(cube.path, out, format=5) == 414
    with segyio.open(out) as f, segyio.open(segy_dir / "f3.sgy") as src:
        assert f.bin[segyio.BinField.Format] == 5
        assert np.array_equal(segyio.tools.cube(f), segyio.tools.cube(src).astype(np.float32))
        assert dict(f.header[7]) == dict(src.header[7])


# -- files without inline/crossline geometry -------------------------------------------------------


def test_shot_gather_without_inline_crossline_numbers_is_refused_with_a_hint(
    segy_dir, tmp_path, no_complete_store
):
    store = tmp_path / "shots.zarr"
    with pytest.raises(cubeslab.GeometryError) as info:
        cubeslab.ingest(segy_dir / "shot-gather.sgy", store)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "shot-gather.sgy" in message
    assert "189" in message and "193" in message  # the byte locations it looked at
    assert "inline-byte" in message  # and how to change them
    no_complete_store(store)


def test_seismic_unix_file_is_refused_naming_the_format_field(segy_dir, tmp_path, no_complete_store):
    store = tmp_path / "su.zarr"
    with pytest.raises(cubeslab.InvalidInputError) as info:
        cubeslab.ingest(segy_dir / "small.su", store)
    message = str(info.value)
    assert "small.su" in message and "3225" in message
    assert "Seismic Unix" in message
    no_complete_store(store)
