"""Malformed inputs (broken SEG-Y files, cases A1-A9 below; A14: Zarr stores with corrupt or unsupported
metadata), store overwrite rules, interrupted ingests and CLI exit codes.

Pass means: a documented typed error (a cubeslab class that is also the builtin a caller would catch),
whose message names the file and the byte offset / trace number / field, and no store left that looks
complete; or a documented repair whose result equals an independent oracle (segyio, the synthetic
survey's own amplitudes, numpy, Python's cp037 codec). Never a panic (InternalError) or a traceback.

Fixtures are a small synthetic survey (6 inlines x 5 crosslines x 20 samples, IEEE float, big endian)
corrupted with plain Python, and copies of the test data in tests/data.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import segyio
import zarr

import cubeslab
from cubeslab import _engine

CLI = Path(sys.executable).parent / "cubeslab"
INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)


def ingest_fails(src, store, error_class, builtin, **options) -> str:
    """Ingest must raise ``error_class`` (also a ``builtin``), name ``src``, and leave no complete store."""
    with pytest.raises(error_class) as info:
        cubeslab.ingest(src, store, **options)
    error = info.value
    assert isinstance(error, builtin)
    assert not isinstance(error, cubeslab.InternalError)
    message = str(error)
    assert str(src) in message, f"message does not name the file: {message}"
    with pytest.raises((cubeslab.StoreNotFoundError, cubeslab.IncompleteStoreError)):
        cubeslab.open(store)
    return message


def names(message: str, *numbers) -> bool:
    """Every number appears in ``message`` as a whole word."""
    return all(re.search(rf"(?<![\d-]){re.escape(str(n))}(?!\d)", message) for n in numbers)


def assert_cube_equals_survey(cube, segy) -> None:
    """The cube holds exactly the synthetic survey, on its inline/crossline numbers."""
    assert np.array_equal(cube.coords["inline"], segy.survey.inlines)
    assert np.array_equal(cube.coords["crossline"], segy.survey.crosslines)
    assert np.array_equal(cube[...], segy.volume())


def run_cli(*args, check_clean=True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check_clean:
        assert "Traceback" not in result.stderr, result.stderr
    return result


# -- A1: files shorter than the file headers -------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 3199, 3599])
def test_file_shorter_than_3600_bytes_is_refused_naming_its_size(synthetic_segy, tmp_path, size):
    segy = synthetic_segy()
    src = segy.variant(f"short-{size}.sgy", data=segy.path.read_bytes()[:size])
    message = ingest_fails(src, tmp_path / "s.zarr", cubeslab.InvalidInputError, ValueError)
    assert names(message, size, 3600)
    assert "too short" in message


def test_headers_without_any_trace_are_refused(synthetic_segy, tmp_path):
    segy = synthetic_segy()
    src = segy.variant("headers-only.sgy", data=segy.path.read_bytes()[:3600])
    message = ingest_fails(src, tmp_path / "s.zarr", cubeslab.InvalidInputError, ValueError)
    assert "no traces" in message


# -- A2: truncated last trace ----------------------------------------------------------------------


def cut_mid_trace(segy, trace: int, into: int = 123) -> Path:
    """A copy cut ``into`` bytes into trace ``trace`` (so traces 0..trace-1 are whole)."""
    return segy.variant("cut.sgy", data=segy.path.read_bytes()[: segy.trace_offset(trace) + into])


def test_truncated_last_trace_is_refused_with_trace_count_inconsistent(synthetic_segy, tmp_path):
    segy = synthetic_segy()
    src = cut_mid_trace(segy, 17)
    size = src.stat().st_size
    message = ingest_fails(src, tmp_path / "t.zarr", cubeslab.InvalidInputError, ValueError)
    assert "trace count inconsistent" in message
    assert names(message, 17, size)  # the cut trace's number and the byte where the file ends
    assert "allow_truncated" in message or "allow-truncated" in message


def test_allow_truncated_ingests_the_whole_traces_equal_to_segyio(synthetic_segy, tmp_path, ingest_cube):
    segy = synthetic_segy()
    whole = 17
    src = cut_mid_trace(segy, whole)
    prefix = segy.variant("prefix.sgy", data=segy.path.read_bytes()[: segy.trace_offset(whole)])
    cube = ingest_cube(src, allow_truncated=True)
    assert any("cut short" in w and names(w, whole, src.stat().st_size) for w in cube.summary["warnings"])
    assert cube.summary["live_traces"] == whole
    with segyio.open(prefix, ignore_geometry=True) as f:  # oracle: the untruncated prefix
        assert f.tracecount == whole
        il = f.attributes(segyio.TraceField.INLINE_3D)[:]
        xl = f.attributes(segyio.TraceField.CROSSLINE_3D)[:]
        for i in range(f.tracecount):
            assert np.array_equal(cube.trace(il[i], xl[i]), f.trace[i]), f"trace {i}"
        live = set(zip(il.tolist(), xl.tolist(), strict=True))
    mask = cube.trace_mask
    for a, i_label in enumerate(cube.coords["inline"]):
        for b, x_label in enumerate(cube.coords["crossline"]):
            assert mask[a, b] == ((int(i_label), int(x_label)) in live)
            if not mask[a, b]:
                assert np.isnan(cube[a, b]).all()


def test_allow_truncated_with_no_whole_trace_is_still_an_error(synthetic_segy, tmp_path):
    segy = synthetic_segy()
    src = cut_mid_trace(segy, 0, into=100)
    message = ingest_fails(
        src, tmp_path / "t.zarr", cubeslab.InvalidInputError, ValueError, allow_truncated=True
    )
    assert "trace count inconsistent" in message


# -- A3: samples per trace -------------------------------------------------------------------------


def test_binary_sample_count_zero_uses_the_trace_header_count(synthetic_segy, ingest_cube):
    segy = synthetic_segy()
    cube = ingest_cube(segy.patch("ns0.sgy", 3221, 0, 2))
    assert_cube_equals_survey(cube, segy)


@pytest.mark.parametrize("binary_ns", [30, 65535, 10])
def test_binary_sample_count_not_fitting_the_file_is_repaired_with_a_warning(
    synthetic_segy, ingest_cube, binary_ns
):
    segy = synthetic_segy()
    cube = ingest_cube(segy.patch(f"ns{binary_ns}.sgy", 3221, binary_ns, 2))
    assert_cube_equals_survey(cube, segy)
    assert any(names(w, 3221, 115, binary_ns) for w in cube.summary["warnings"]), cube.summary["warnings"]


def test_binary_sample_count_that_also_divides_the_file_is_not_silently_believed(synthetic_segy, tmp_path):
    """Binary header says 40 samples, every trace header says 20: 30 traces of 20 samples are also 24
    'traces' of 40 samples. The disagreement must be noticed: either the data is read right (with a
    warning naming both fields) or the error names bytes 3221 and 115 - not a misleading geometry error."""
    segy = synthetic_segy()
    src = segy.patch("ns40.sgy", 3221, 40, 2)
    assert (src.stat().st_size - 3600) % (240 + 4 * 40) == 0  # the premise
    store = tmp_path / "ns40.zarr"
    try:
        summary = cubeslab.ingest(src, store)
    except cubeslab.CubeslabError as error:
        assert isinstance(error, cubeslab.InvalidInputError)
        assert names(str(error), 3221, 115), f"error does not name the sample-count fields: {error}"
        with pytest.raises((cubeslab.StoreNotFoundError, cubeslab.IncompleteStoreError)):
            cubeslab.open(store)
    else:
        assert_cube_equals_survey(cubeslab.open(store), segy)
        assert any(names(w, 3221, 115) for w in summary["warnings"]), summary["warnings"]


def test_trace_header_sample_count_disagreeing_with_a_fitting_binary_count_reads_right(
    synthetic_segy, ingest_cube
):
    segy = synthetic_segy()
    cube = ingest_cube(segy.patch_traces("trace-ns30.sgy", 115, 30, size=2))
    assert_cube_equals_survey(cube, segy)


def test_no_sample_count_anywhere_is_refused_naming_both_fields(synthetic_segy, tmp_path):
    segy = synthetic_segy()

    def mutate(raw):
        raw[3220:3222] = b"\0\0"
        for i in range(segy.n_traces):
            segy.set_trace_field(raw, i, 115, 0, 2)

    src = segy.variant("no-ns.sgy", mutate)
    message = ingest_fails(src, tmp_path / "n.zarr", cubeslab.InvalidInputError, ValueError)
    assert names(message, 3221, 115)


# -- A4: data sample format code -------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 17, 255])
def test_invalid_sample_format_code_is_refused_naming_byte_3225(synthetic_segy, tmp_path, code):
    segy = synthetic_segy()
    src = segy.patch(f"format{code}.sgy", 3225, code, 2)
    message = ingest_fails(src, tmp_path / "f.zarr", cubeslab.InvalidInputError, ValueError)
    assert "3225" in message
    assert re.search(rf"\bis {code}\b", message), message


def test_native_dtype_of_an_invalid_format_code_is_a_clear_error(synthetic_segy, tmp_path):
    segy = synthetic_segy()
    src = segy.patch("format17.sgy", 3225, 17, 2)
    message = ingest_fails(src, tmp_path / "f.zarr", cubeslab.InvalidInputError, ValueError, dtype="native")
    assert "3225" in message


# -- A5: byte order --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["f3-lsb.sgy", "small-lsb.sgy"])
def test_little_endian_file_is_detected_and_equals_segyio(segy_dir, ingest_cube, name):
    path = segy_dir / name
    cube = ingest_cube(path)  # endian="auto"
    with segyio.open(path, endian="little") as f:
        assert np.array_equal(cube[...], segyio.tools.cube(f).astype(np.float32))
        assert np.array_equal(cube.coords["inline"], f.ilines)
        assert np.array_equal(cube.headers["CDP_X"].ravel(), f.attributes(segyio.TraceField.CDP_X)[:])
    twin = ingest_cube(segy_dir / name.replace("-lsb", ""))  # the same survey, big endian
    assert np.array_equal(cube[...], twin[...])
    assert cube.binary_header == twin.binary_header
    assert cube._file_header_attributes()["endianness"] == "little"


def test_forcing_the_wrong_byte_order_is_an_error_not_wrong_values(segy_dir, tmp_path):
    src = segy_dir / "f3-lsb.sgy"
    message = ingest_fails(src, tmp_path / "w.zarr", cubeslab.InvalidInputError, ValueError, endian="big")
    assert "3225" in message


# -- A6: sample interval ---------------------------------------------------------------------------


def with_intervals(segy, binary: int, trace: int) -> Path:
    def mutate(raw):
        raw[3216:3218] = binary.to_bytes(2, "big", signed=True)
        for i in range(segy.n_traces):
            segy.set_trace_field(raw, i, 117, trace, 2)

    return segy.variant(f"dt-{binary}-{trace}.sgy", mutate)


@pytest.mark.parametrize(("binary", "trace"), [(0, 0), (-4000, -4000), (0, -4000), (-4000, 0)])
def test_no_positive_sample_interval_is_refused_naming_byte_3217(synthetic_segy, tmp_path, binary, trace):
    segy = synthetic_segy()
    src = with_intervals(segy, binary, trace)
    message = ingest_fails(src, tmp_path / "dt.zarr", cubeslab.InvalidInputError, ValueError)
    assert names(message, 3217, 117)
    assert "sample-interval" in message or "sample_interval" in message  # how to fix it


@pytest.mark.parametrize("binary", [0, -2000])
def test_positive_trace_header_interval_is_used_when_the_binary_one_is_not(
    synthetic_segy, ingest_cube, binary
):
    segy = synthetic_segy()
    src = with_intervals(segy, binary, 3000)
    cube = ingest_cube(src)
    with segyio.open(src) as f:
        assert np.array_equal(cube.coords["time"], f.samples)
    assert np.array_equal(cube.coords["time"], np.arange(segy.shape[2]) * 3.0)
    assert np.array_equal(cube[...], segy.volume())


def test_sample_interval_option_rescues_a_file_without_one(synthetic_segy, ingest_cube):
    segy = synthetic_segy()
    cube = ingest_cube(with_intervals(segy, 0, 0), sample_interval_us=2500)
    assert np.array_equal(cube.coords["time"], np.arange(segy.shape[2]) * 2.5)


# -- A7: textual headers ---------------------------------------------------------------------------


def text_oracle(raw: bytes, encoding: str) -> str:
    """cubeslab's documented decoding: cp037 or ASCII, non-printable -> space, 40 lines of 80."""
    text = raw.decode("cp037" if encoding == "ebcdic" else "latin-1")
    text = "".join(c if " " <= c <= "~" else " " for c in text)
    return "\n".join(text[i : i + 80] for i in range(0, 3200, 80))


ASCII_TEXT = "".join(
    f"C{i:2d} ASCII TEXTUAL HEADER, LINE {i}; a-z 0-9 (){{}}[]<>|!^~".ljust(80) for i in range(1, 41)
)


@pytest.mark.parametrize("encoding", ["ascii", "ebcdic"])
def test_textual_header_decodes_in_either_encoding(synthetic_segy, ingest_cube, encoding):
    segy = synthetic_segy()
    raw = ASCII_TEXT.encode("cp037" if encoding == "ebcdic" else "ascii")
    src = segy.variant(f"{encoding}.sgy", lambda b: b.__setitem__(slice(0, 3200), raw))
    cube = ingest_cube(src)
    assert cube.text_header == text_oracle(raw, encoding)
    assert cube.text_header.replace("\n", "") == ASCII_TEXT
    assert cube._file_header_attributes()["textEncoding"] == encoding
    assert_cube_equals_survey(cube, segy)


@pytest.mark.parametrize("encoding", ["ascii", "ebcdic"])
def test_embedded_nul_bytes_become_spaces_and_nothing_else_changes(synthetic_segy, ingest_cube, encoding):
    segy = synthetic_segy()
    raw = bytearray(ASCII_TEXT.encode("cp037" if encoding == "ebcdic" else "ascii"))
    for at in (5, 100, 2000, 3199):
        raw[at] = 0
    src = segy.variant(f"nul-{encoding}.sgy", lambda b: b.__setitem__(slice(0, 3200), raw))
    cube = ingest_cube(src)
    assert cube.text_header == text_oracle(bytes(raw), encoding)
    flat = cube.text_header.replace("\n", "")
    assert [flat[i] for i in (5, 100, 2000, 3199)] == [" "] * 4
    assert cube._file_header_attributes()["textEncoding"] == encoding


def test_every_ebcdic_byte_decodes_as_code_page_037_or_a_space(synthetic_segy, ingest_cube):
    segy = synthetic_segy()
    raw = ("C 1".encode("cp037") + bytes(range(256)) * 12)[:3200].ljust(3200, b"\x40")
    src = segy.variant("all-bytes.sgy", lambda b: b.__setitem__(slice(0, 3200), raw))
    cube = ingest_cube(src)
    assert cube.text_header == text_oracle(raw, "ebcdic")


def test_raw_textual_header_is_kept_for_export(synthetic_segy, ingest_cube, tmp_path):
    segy = synthetic_segy()
    raw = bytes(range(256)) * 12 + bytes(128)  # undecodable as text
    src = segy.variant("binary-text.sgy", lambda b: b.__setitem__(slice(0, 3200), raw))
    cube = ingest_cube(src)
    cubeslab.export(cube.path, tmp_path / "out.sgy")
    assert (tmp_path / "out.sgy").read_bytes() == src.read_bytes()


def test_huge_extended_header_count_is_refused_naming_byte_3505(synthetic_segy, tmp_path):
    segy = synthetic_segy()
    src = segy.patch("ext30000.sgy", 3505, 30000, 2)
    message = ingest_fails(src, tmp_path / "x.zarr", cubeslab.InvalidInputError, ValueError)
    assert names(message, 3505, 30000)


HUGE_COUNT_UNDER_MEMORY_CAP = textwrap.dedent(
    """
    import resource, sys
    import cubeslab
    def vm_bytes():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    # 64 MiB of address space beyond what is mapped now: 32767 extended headers would need 100 MiB
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + (64 << 20), resource.RLIM_INFINITY))
    try:
        cubeslab.ingest(sys.argv[1], sys.argv[2])
    except cubeslab.InvalidInputError as error:
        print("refused:", error)
    """
)


def test_huge_extended_header_count_is_checked_before_allocating(synthetic_segy, tmp_path):
    segy = synthetic_segy()
    src = segy.patch("ext32767.sgy", 3505, 32767, 2)
    result = subprocess.run(
        [sys.executable, "-c", HUGE_COUNT_UNDER_MEMORY_CAP, str(src), str(tmp_path / "x.zarr")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "refused:" in result.stdout and "3505" in result.stdout


@pytest.mark.parametrize("count", [-5, -2, -32768])
def test_negative_extended_header_count_is_refused_naming_byte_3505(synthetic_segy, tmp_path, count):
    segy = synthetic_segy()
    src = segy.patch(f"ext{count}.sgy", 3505, count, 2)
    message = ingest_fails(src, tmp_path / "x.zarr", cubeslab.InvalidInputError, ValueError)
    assert names(message, 3505, count)


def with_extended_headers(segy, count_field: int, stanzas: list[bytes]) -> Path:
    raw = segy.path.read_bytes()
    head = bytearray(raw[:3600])
    head[3504:3506] = count_field.to_bytes(2, "big", signed=True)
    return segy.variant(f"ext-{count_field}.sgy", data=bytes(head) + b"".join(stanzas) + raw[3600:])


EXTENDED = "".join(f"C{i:2d} EXTENDED TEXTUAL HEADER".ljust(80) for i in range(1, 41)).encode("cp037")
END_TEXT = "((SEG: EndText))".ljust(3200).encode("ascii")


def test_file_with_an_extended_textual_header_ingests_equal_to_segyio(synthetic_segy, ingest_cube):
    segy = synthetic_segy()
    src = with_extended_headers(segy, 1, [EXTENDED])
    cube = ingest_cube(src)
    with segyio.open(src) as f:
        assert f.ext_headers == 1
        assert np.array_equal(cube[...], segyio.tools.cube(f))
    assert_cube_equals_survey(cube, segy)


def test_variable_extended_headers_end_at_the_endtext_stanza(synthetic_segy, ingest_cube):
    segy = synthetic_segy()
    cube = ingest_cube(with_extended_headers(segy, -1, [EXTENDED, END_TEXT]))
    assert_cube_equals_survey(cube, segy)


def test_variable_extended_headers_without_endtext_are_refused(synthetic_segy, tmp_path):
    segy = synthetic_segy()
    src = with_extended_headers(segy, -1, [EXTENDED])
    message = ingest_fails(src, tmp_path / "x.zarr", cubeslab.InvalidInputError, ValueError)
    assert "3505" in message and "EndText" in message


def test_extended_textual_header_survives_export(synthetic_segy, ingest_cube, tmp_path):
    """Export must write the extended textual headers after the binary header, as in the source."""
    segy = synthetic_segy()
    src = with_extended_headers(segy, 1, [EXTENDED])
    cube = ingest_cube(src)
    out = tmp_path / "out.sgy"
    cubeslab.export(cube.path, out)
    exported, source = out.read_bytes(), src.read_bytes()
    assert exported[3200:3600] == source[3200:3600], "binary header is not at bytes 3201-3600"
    assert exported == source
    with segyio.open(out) as f:
        assert f.ext_headers == 1
        assert np.array_equal(segyio.tools.cube(f), segy.volume())


# -- A8: extreme header values ---------------------------------------------------------------------


def test_inline_and_crossline_numbers_at_int32_limits(synthetic_segy, tmp_path):
    segy = synthetic_segy(2, 5, 20)
    inlines = [INT32_MAX, INT32_MIN]
    crosslines = [INT32_MIN, INT32_MIN + 1, 0, INT32_MAX - 1, INT32_MAX]

    def mutate(raw):
        for i in range(segy.n_traces):
            segy.set_trace_field(raw, i, 189, inlines[i // 5], 4)
            segy.set_trace_field(raw, i, 193, crosslines[i % 5], 4)

    src = segy.variant("int32-limits.sgy", mutate)
    store = tmp_path / "limits.zarr"
    try:
        cubeslab.ingest(src, store)
    except cubeslab.CubeslabError as error:  # a clear refusal is acceptable, a panic is not
        assert not isinstance(error, cubeslab.InternalError), error
        assert isinstance(error, cubeslab.InvalidInputError) and str(src) in str(error)
        return
    cube = cubeslab.open(store)
    assert np.array_equal(cube.coords["inline"], sorted(inlines))
    assert np.array_equal(cube.coords["crossline"], crosslines)
    volume = segy.volume()
    for i, il in enumerate(inlines):
        for j, xl in enumerate(crosslines):
            assert np.array_equal(cube.trace(il, xl), volume[i, j])
    assert np.array_equal(cube.inline[INT32_MIN], volume[1])
    assert np.array_equal(cube.headers["INLINE_3D"][:, 0], sorted(inlines))


@pytest.mark.parametrize("scalar", [0, 1, -1, 10000, -10000, 7, -3, 32767, -32768])
def test_cdp_coordinates_follow_any_coordinate_scalar(synthetic_segy, ingest_cube, scalar):
    segy = synthetic_segy()
    xs = np.linspace(INT32_MIN, INT32_MAX, segy.n_traces).astype(np.int64)

    def mutate(raw):
        for i in range(segy.n_traces):
            segy.set_trace_field(raw, i, 71, scalar, 2)
            segy.set_trace_field(raw, i, 181, int(xs[i]), 4)

    src = segy.variant(f"scalar{scalar}.sgy", mutate)
    cube = ingest_cube(src)
    with segyio.open(src) as f:
        x = f.attributes(segyio.TraceField.CDP_X)[:].astype(np.float64)
        y = f.attributes(segyio.TraceField.CDP_Y)[:].astype(np.float64)
        s = f.attributes(segyio.TraceField.SourceGroupScalar)[:]
    assert (s == scalar).all() and np.array_equal(x, xs)
    if scalar > 0:
        expected_x, expected_y = x * scalar, y * scalar
    elif scalar < 0:
        expected_x, expected_y = x / -scalar, y / -scalar
    else:  # zero means one
        expected_x, expected_y = x, y
    assert np.array_equal(cube.headers["cdp_x"].ravel(), expected_x)
    assert np.array_equal(cube.headers["cdp_y"].ravel(), expected_y)
    assert np.array_equal(cube.headers["SourceGroupScalar"].ravel(), s)


# -- A9: geometry ----------------------------------------------------------------------------------


def test_duplicate_inline_crossline_pair_is_refused_naming_both_traces(synthetic_segy, tmp_path):
    segy = synthetic_segy()
    first, second = 11, 23
    il, xl = int(segy.survey.inlines[first // 5]), int(segy.survey.crosslines[first % 5])

    def mutate(raw):
        segy.set_trace_field(raw, second, 189, il, 4)
        segy.set_trace_field(raw, second, 193, xl, 4)

    src = segy.variant("duplicate.sgy", mutate)
    message = ingest_fails(src, tmp_path / "d.zarr", cubeslab.GeometryError, ValueError)
    assert names(message, first, second, il, xl), message
    assert "duplicate" in message


def test_missing_traces_are_masked_and_filled(synthetic_segy, ingest_cube):
    segy = synthetic_segy()
    gone = [0, 7, 29]  # first, inner, last
    keep = [i for i in range(segy.n_traces) if i not in gone]
    cube = ingest_cube(segy.reorder("holes.sgy", keep))
    expected_mask = np.ones(segy.shape[:2], bool)
    for i in gone:
        expected_mask[i // 5, i % 5] = False
    assert np.array_equal(cube.trace_mask, expected_mask)
    assert cube.summary["missing_traces"] == len(gone)
    data, volume = cube[...], segy.volume()
    assert np.isnan(data[~expected_mask]).all()
    assert np.array_equal(data[expected_mask], volume[expected_mask])


def test_small_hole_reports_its_missing_trace(segy_dir, ingest_cube):
    cube = ingest_cube(segy_dir / "small_hole.sgy")
    with segyio.open(segy_dir / "small_hole.sgy", ignore_geometry=True) as f:
        cells = {
            (int(h[segyio.TraceField.INLINE_3D]), int(h[segyio.TraceField.CROSSLINE_3D])) for h in f.header
        }
    missing = cube.trace_mask.size - len(cells)
    assert missing >= 1
    assert cube.summary["missing_traces"] == missing == (~cube.trace_mask).sum()


ORDERS = {
    "crossline-sorted": lambda n_il, n_xl: [il * n_xl + xl for xl in range(n_xl) for il in range(n_il)],
    "unsorted": lambda n_il, n_xl: list(np.random.default_rng(4).permutation(n_il * n_xl)),
    "decreasing": lambda n_il, n_xl: list(range(n_il * n_xl))[::-1],
}
LAYOUTS = {"default": {}, "small-shards": {"layout": "2x2x4/4x2x8"}}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("order", list(ORDERS))
def test_trace_order_does_not_change_the_cube(synthetic_segy, ingest_cube, order, layout):
    segy = synthetic_segy(7, 5, 20)
    cube = ingest_cube(segy.reorder(f"{order}.sgy", ORDERS[order](7, 5)), **LAYOUTS[layout])
    assert_cube_equals_survey(cube, segy)
    assert cube.trace_mask.all()
    if order != "decreasing":  # (a decreasing file is reported "unsorted"; no label is asserted for it)
        assert cube.summary["sorting"] == {"crossline-sorted": "crossline", "unsorted": "unsorted"}[order]


def test_all_zero_inline_and_crossline_numbers_are_refused_with_a_hint(synthetic_segy, tmp_path):
    segy = synthetic_segy()

    def mutate(raw):
        for i in range(segy.n_traces):
            segy.set_trace_field(raw, i, 189, 0, 4)
            segy.set_trace_field(raw, i, 193, 0, 4)

    src = segy.variant("zero-keys.sgy", mutate)
    message = ingest_fails(src, tmp_path / "z.zarr", cubeslab.GeometryError, ValueError)
    assert names(message, 189, 193)
    assert "--inline-byte" in message  # how to point at the right bytes


def test_wrong_byte_positions_on_f3_are_refused_with_a_hint(segy_dir, tmp_path):
    src = segy_dir / "f3.sgy"
    message = ingest_fails(
        src, tmp_path / "w.zarr", cubeslab.GeometryError, ValueError, inline_byte=9, crossline_byte=13
    )
    assert names(message, 9, 13)
    assert "byte locations" in message


def test_byte_positions_giving_a_sparse_grid_are_refused_with_a_hint(segy_dir, tmp_path):
    src = segy_dir / "f3.sgy"  # CDP X / Y (181/185) differ in every trace: 414 traces on a 414 x 414 grid
    message = ingest_fails(
        src, tmp_path / "w.zarr", cubeslab.GeometryError, ValueError, inline_byte=181, crossline_byte=185
    )
    assert names(message, 181, 185)
    assert "--inline-byte" in message


def test_sparse_grid_of_a_small_file_is_refused_too(synthetic_segy, tmp_path):
    """Bytes 1/5 (trace sequence numbers) put 30 traces on a 30 x 30 grid: 97% empty, a ratio of cells
    to traces of 30 (MDIO refuses above 10). A small file must not slip through the sparsity check."""
    segy = synthetic_segy()
    message = ingest_fails(
        segy.path, tmp_path / "w.zarr", cubeslab.GeometryError, ValueError, inline_byte=1, crossline_byte=5
    )
    assert names(message, 1, 5)
    assert "--inline-byte" in message


@pytest.mark.parametrize("byte", [0, 238, 241, 10_000])
def test_byte_position_outside_the_trace_header_is_refused(synthetic_segy, tmp_path, byte):
    segy = synthetic_segy()
    message = ingest_fails(
        segy.path, tmp_path / "w.zarr", cubeslab.GeometryError, ValueError, inline_byte=byte
    )
    assert names(message, byte, 240)


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1)], ids=["1x1", "single-inline", "single-crossline"])
def test_degenerate_surveys_ingest_exactly(synthetic_segy, ingest_cube, shape):
    segy = synthetic_segy(*shape, 20)
    cube = ingest_cube(segy.path)
    assert cube.shape == (*shape, 20)
    assert_cube_equals_survey(cube, segy)
    volume = segy.volume()
    assert np.array_equal(cube.inline[int(segy.survey.inlines[0])], volume[0])
    assert np.array_equal(cube.crossline[int(segy.survey.crosslines[-1])], volume[:, -1])
    assert np.array_equal(cube.time_slice[cube.coords["time"][5]], volume[..., 5])


def test_prestack_file_gets_an_offset_dimension_equal_to_segyio(segy_dir, ingest_cube):
    path = segy_dir / "small-ps.sgy"
    cube = ingest_cube(path)
    with segyio.open(path) as f:
        assert cube.dims == ["inline", "crossline", "offset", "time"]
        assert np.array_equal(cube.coords["offset"], f.offsets)
        assert np.array_equal(cube[...], segyio.tools.cube(f))
    assert cube.attributes["attributes"]["gatherType"] == "cdp_gathers"


def test_prestack_with_a_wrong_offset_byte_is_a_duplicate_error(segy_dir, tmp_path):
    src = segy_dir / "small-ps.sgy"
    message = ingest_fails(src, tmp_path / "p.zarr", cubeslab.GeometryError, ValueError, offset_byte=1)
    assert "duplicate" in message and "byte 1" in message


def test_shot_gather_is_refused(segy_dir, tmp_path):
    message = ingest_fails(
        segy_dir / "shot-gather.sgy", tmp_path / "s.zarr", cubeslab.GeometryError, ValueError
    )
    assert "no 3D geometry" in message


def test_seismic_unix_file_is_refused(segy_dir, tmp_path):
    message = ingest_fails(segy_dir / "small.su", tmp_path / "s.zarr", cubeslab.InvalidInputError, ValueError)
    assert "Seismic Unix" in message and "3225" in message


# -- A14 (what exists): Zarr stores with corrupt or unsupported metadata ---------------------------


@pytest.fixture
def good_store(segy_dir, tmp_path):
    store = tmp_path / "good.zarr"
    cubeslab.ingest(segy_dir / "small.sgy", store)
    return store


def edit_metadata(store: Path, node: str, edit) -> Path:
    file = store / node / "zarr.json"
    text = file.read_text()
    file.write_text(edit(text))
    return file


def json_edit(change):
    def edit(text):
        meta = json.loads(text)
        change(meta)
        return json.dumps(meta)

    return edit


@pytest.mark.parametrize("node", ["", "amplitude", "inline"], ids=["group", "amplitude", "inline"])
def test_invalid_json_metadata_is_an_invalid_input_error_naming_the_file(good_store, node):
    file = edit_metadata(good_store, node, lambda text: text[: len(text) // 2])
    with pytest.raises(cubeslab.InvalidInputError) as info:
        cubeslab.open(good_store)[...]
    assert isinstance(info.value, ValueError)
    assert str(file) in str(info.value)
    assert "JSON" in str(info.value)


def test_metadata_that_is_not_a_json_object_is_an_invalid_input_error(good_store):
    file = edit_metadata(good_store, "", lambda text: "[1, 2, 3]")
    with pytest.raises(cubeslab.InvalidInputError, match=re.escape(str(file))):
        cubeslab.open(good_store)


@pytest.mark.parametrize(
    ("change", "mentions"),
    [
        (lambda m: m["codecs"][0].__setitem__("name", "frobnicate"), "frobnicate"),
        (lambda m: m.__setitem__("zarr_format", 2), "zarr_format"),
        (lambda m: m.__setitem__("node_type", "group"), "node_type"),
        (lambda m: m["chunk_key_encoding"].__setitem__("name", "weird"), "weird"),
        (lambda m: m.__setitem__("shape", [-5, 5, 50]), "-5"),
        (lambda m: m.__setitem__("shape", [5, 5]), "dimensionality"),
    ],
    ids=["unknown-codec", "zarr-v2", "not-an-array", "chunk-key-encoding", "negative-shape", "rank-mismatch"],
)
def test_unsupported_or_impossible_array_metadata_is_refused(good_store, change, mentions):
    file = edit_metadata(good_store, "amplitude", json_edit(change))
    with pytest.raises(cubeslab.InvalidInputError) as info:
        cubeslab.open(good_store)[...]
    assert str(file) in str(info.value)
    assert mentions in str(info.value)


def test_unsupported_dtype_written_by_zarr_python_is_refused(tmp_path):
    path = tmp_path / "complex.zarr"
    zarr.create_array(path, shape=(4, 4), dtype="complex64", chunks=(2, 2))[...] = 1 + 2j
    with pytest.raises(cubeslab.InvalidInputError) as info:
        cubeslab.Array(path)
    assert "complex64" in str(info.value) and str(path) in str(info.value)


def test_opening_a_path_that_is_not_a_store_is_store_not_found(segy_dir, tmp_path):
    for path in (tmp_path / "nothing-here.zarr", segy_dir / "f3.sgy", tmp_path):
        with pytest.raises(cubeslab.StoreNotFoundError) as info:
            cubeslab.open(path)
        assert isinstance(info.value, FileNotFoundError)
        assert str(path) in str(info.value)


# -- stores: existing targets, overwrite, interrupted ingests ---------------------------------------


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_ingest_refuses_an_existing_store_and_leaves_it_untouched(segy_dir, good_store):
    before = snapshot(good_store)
    with pytest.raises(cubeslab.StoreExistsError) as info:
        cubeslab.ingest(segy_dir / "f3.sgy", good_store)
    assert isinstance(info.value, FileExistsError)
    assert str(good_store) in str(info.value) and "overwrite" in str(info.value)
    assert snapshot(good_store) == before
    with segyio.open(segy_dir / "small.sgy") as f:
        assert np.array_equal(cubeslab.open(good_store)[...], segyio.tools.cube(f))


def test_ingest_with_overwrite_replaces_the_store(segy_dir, good_store):
    cubeslab.ingest(segy_dir / "f3.sgy", good_store, overwrite=True)
    with segyio.open(segy_dir / "f3.sgy") as f:
        cube = cubeslab.open(good_store)
        assert np.array_equal(cube[...], segyio.tools.cube(f).astype(np.float32))
        assert np.array_equal(cube.coords["inline"], f.ilines)


FAILING_OVERWRITES = {
    "unreadable-source": ("small.su", {}),
    "shards-not-a-multiple-of-chunks": ("f3.sgy", {"layout": "8x8x8/16x16x70"}),
    "memory-limit-too-small": (
        "f3.sgy",
        {"layout": "8x8x8/16x16x72", "memory_limit": 1 << 16},
    ),
}


@pytest.mark.parametrize("cause", list(FAILING_OVERWRITES))
def test_failed_ingest_with_overwrite_leaves_the_old_store_readable(segy_dir, good_store, cause):
    """An ingest that is refused (bad source, impossible layout or memory bound) must not have deleted
    the store it was asked to replace: the checks come before anything on disk changes."""
    source, options = FAILING_OVERWRITES[cause]
    before = snapshot(good_store)
    with pytest.raises(cubeslab.InvalidInputError):
        cubeslab.ingest(segy_dir / source, good_store, overwrite=True, **options)
    assert snapshot(good_store) == before
    assert cubeslab.open(good_store).shape == (5, 5, 50)


def test_overwrite_refuses_to_delete_a_folder_that_is_not_a_zarr_store(segy_dir, tmp_path):
    folder = tmp_path / "my-data"
    folder.mkdir()
    (folder / "precious.txt").write_text("keep me")
    with pytest.raises(cubeslab.StoreExistsError) as info:
        cubeslab.ingest(segy_dir / "small.sgy", folder, overwrite=True)
    assert isinstance(info.value, FileExistsError)
    assert str(folder) in str(info.value) and "not a Zarr store" in str(info.value)
    assert (folder / "precious.txt").read_text() == "keep me"


def test_overwrite_refuses_to_delete_a_file(segy_dir, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    with pytest.raises(cubeslab.StoreExistsError):
        cubeslab.ingest(segy_dir / "small.sgy", target, overwrite=True)
    assert target.read_text() == "keep me"


def test_overwrite_into_an_empty_folder_works(segy_dir, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    cubeslab.ingest(segy_dir / "small.sgy", folder, overwrite=True)
    assert cubeslab.open(folder).shape == (5, 5, 50)


def test_layout_that_does_not_fit_the_memory_limit_is_refused_and_no_complete_store_is_left(
    segy_dir, tmp_path
):
    store = tmp_path / "m.zarr"
    with pytest.raises(cubeslab.InvalidInputError) as info:
        cubeslab.ingest(segy_dir / "f3.sgy", store, layout="8x8x8/16x16x72", memory_limit=1 << 16)
    assert "memory limit" in str(info.value)
    with pytest.raises((cubeslab.StoreNotFoundError, cubeslab.IncompleteStoreError)):
        cubeslab.open(store)


@pytest.fixture
def interrupted_store(synthetic_segy, tmp_path):
    """A store whose ingest ran one task of many and then stopped (never finished)."""
    segy = synthetic_segy()
    store = tmp_path / "interrupted.zarr"
    options = {"layout": "2x2x4/2x2x4", "memory_limit": 9 << 20, "threads": 1}
    job = _engine.Ingest(str(segy.path), str(store), _engine.IngestOptions(**options))
    assert job.total_tasks > 1
    assert job.step(1) == job.total_tasks - 1
    del job
    return segy, store


def test_interrupted_ingest_leaves_a_store_that_open_refuses_as_incomplete(interrupted_store):
    _, store = interrupted_store
    with pytest.raises(cubeslab.IncompleteStoreError, match="incomplete") as info:
        cubeslab.open(store)
    assert isinstance(info.value, OSError)
    assert str(store) in str(info.value)


def test_interrupted_ingest_cannot_be_exported(interrupted_store, tmp_path):
    _, store = interrupted_store
    with pytest.raises(cubeslab.IncompleteStoreError):
        cubeslab.export(store, tmp_path / "out.sgy")
    assert not (tmp_path / "out.sgy").exists()


def test_cli_info_shows_an_interrupted_store_as_incomplete(interrupted_store):
    _, store = interrupted_store
    text = run_cli("info", store)
    assert text.returncode == 0, text.stderr
    assert re.search(r"state\s+incomplete", text.stdout), text.stdout
    as_json = run_cli("info", "--json", store)
    assert as_json.returncode == 0
    report = json.loads(as_json.stdout)
    assert report["state"] == "incomplete"
    assert "overwrite" in report["hint"]


def test_interrupted_ingest_is_replaced_by_a_complete_one_with_overwrite(interrupted_store):
    segy, store = interrupted_store
    cubeslab.ingest(segy.path, store, overwrite=True)
    assert_cube_equals_survey(cubeslab.open(store), segy)


# -- CLI: bad input is exit code 1 with the message on stderr, no traceback --------------------------


def bad_inputs(segy, segy_dir, tmp_path):
    return {
        "empty-file": (segy.variant("empty.sgy", data=b""), "too short"),
        "format-17": (segy.patch("f17.sgy", 3225, 17, 2), "3225"),
        "seismic-unix": (segy_dir / "small.su", "3225"),
        "shot-gather": (segy_dir / "shot-gather.sgy", "no 3D geometry"),
        "truncated": (cut_mid_trace(segy, 9), "trace count inconsistent"),
        "no-such-file": (tmp_path / "does-not-exist.sgy", "does-not-exist.sgy"),
        "brackets-in-name": (segy.patch("survey[old].sgy", 3225, 17, 2), "3225"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "empty-file",
        "format-17",
        "seismic-unix",
        "shot-gather",
        "truncated",
        "no-such-file",
        "brackets-in-name",
    ],
)
def test_cli_ingest_of_bad_input_exits_1_with_the_message_on_stderr(synthetic_segy, segy_dir, tmp_path, case):
    src, fragment = bad_inputs(synthetic_segy(), segy_dir, tmp_path)[case]
    store = tmp_path / "cli.zarr"
    result = run_cli("ingest", src, store)
    assert result.returncode == 1
    assert "error:" in result.stderr
    assert str(src) in result.stderr, result.stderr  # the file, exactly as given (no markup eaten)
    assert fragment in result.stderr
    assert not store.exists() or "incomplete" in run_cli("info", store).stdout


def test_cli_ingest_onto_an_existing_store_exits_1(segy_dir, good_store):
    result = run_cli("ingest", segy_dir / "f3.sgy", good_store)
    assert result.returncode == 1
    assert "already exists" in result.stderr and "--overwrite" in result.stderr


def test_cli_info_of_corrupt_metadata_exits_1_without_traceback(good_store):
    file = edit_metadata(good_store, "", lambda text: text[:10])
    result = run_cli("info", good_store)
    assert result.returncode == 1
    assert str(file) in result.stderr


def test_cli_usage_error_exits_2(good_store, tmp_path):
    result = run_cli("read", good_store, "-o", tmp_path / "x.npy")  # no plane chosen
    assert result.returncode == 2
    assert "exactly one of" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [(("profile", ".", "--no-such-option"), "No such option"), (("info",), "Missing argument 'path'")],
)
def test_cli_unknown_option_or_missing_argument_exits_2_without_traceback(args, message):
    result = run_cli(*args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_memory_cap_helper_really_caps_allocations():
    """The premise of the 'checked before allocating' test: under the cap, a 100 MiB allocation fails."""
    code = HUGE_COUNT_UNDER_MEMORY_CAP.split("try:")[0] + "bytearray(100 << 20)\n"
    result = subprocess.run(
        [sys.executable, "-c", code, "x", "y"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and "MemoryError" in result.stderr


def test_garbage_trace_headers_that_grow_the_grid_are_refused_naming_the_traces(synthetic_segy, tmp_path):
    """Ten of 10,000 trace headers overwritten with random numbers grew a 100 x 100 grid to 110 x 110
    (2,090 empty cells) without a word."""
    segy = synthetic_segy(100, 100, 20)
    rng = np.random.default_rng(5)
    damaged = sorted(rng.choice(segy.n_traces, 10, replace=False).tolist())

    def garble(raw):
        for trace in damaged:
            for byte in (189, 193):
                segy.set_trace_field(raw, trace, byte, int(rng.integers(-(2**31), 2**31)), 4)

    src = segy.variant("garbled.sgy", garble)
    message = ingest_fails(src, tmp_path / "g.zarr", cubeslab.GeometryError, ValueError)
    assert "byte 189" in message and "byte 193" in message
    assert names(message, damaged[0]), message
    assert "empty cells" in message


def test_a_lone_outlier_header_is_ingested_with_a_warning_naming_its_trace(synthetic_segy, tmp_path):
    segy = synthetic_segy(100, 100, 20)
    src = segy.variant("one-odd.sgy", lambda raw: segy.set_trace_field(raw, 4321, 189, 1_999_999_999, 4))
    with pytest.warns(cubeslab.IngestWarning, match=r"1999999999 \(trace 4321\)"):
        summary = cubeslab.ingest(src, tmp_path / "o.zarr")
    assert summary["live_traces"] == segy.n_traces
