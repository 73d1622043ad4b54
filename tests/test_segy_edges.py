"""SEG-Y files at the edges of the standard, each refused with the file, the trace or byte, and the field
named, or read as segyio (the oracle) reads it: traces of varying length, revision 2's extended trace
headers and unsigned intervals, sample-interval options that cannot be right, sources that are not regular
files, samples float32 rounds (warned, and found by verify --against), infinities kept exactly, and the
command line's refusals of unwritable outputs and impossible option values."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import segyio

import cubeslab

CLI = Path(sys.executable).parent / "cubeslab"


def run(*args, timeout: int = 120) -> subprocess.CompletedProcess:
    done = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr, done.stderr
    return done


def said(done: subprocess.CompletedProcess) -> str:
    return " ".join((done.stdout + done.stderr).split())


def write(path: Path, samples: np.ndarray, fmt: int = 5, interval: int = 4000) -> Path:
    """A 3 x 3 survey (inlines 1-3, crosslines 10-12) of ``samples`` (9 traces), written by segyio."""
    spec = segyio.spec()
    spec.iline, spec.xline, spec.format, spec.sorting = 189, 193, fmt, 2
    spec.ilines, spec.xlines, spec.samples = [1, 2, 3], [10, 11, 12], list(range(samples.shape[-1]))
    with segyio.create(path, spec) as f:
        f.bin[segyio.BinField.Interval] = interval
        for i, (il, xl) in enumerate((il, xl) for il in (1, 2, 3) for xl in (10, 11, 12)):
            f.header[i] = {189: il, 193: xl, segyio.TraceField.TRACE_SAMPLE_INTERVAL: interval}
            f.trace[i] = samples[i]
    return path


def test_traces_of_varying_length_are_refused_naming_the_trace_and_byte_115(tmp_path):
    """Trace 4 holds 8 samples and trace 6 holds 12 (byte 115 says so), the rest 10: the total still
    divides into whole 10-sample traces, so only the headers tell; read as 10 each, every trace after
    the 4th would be shifted."""
    path = write(tmp_path / "fixed.sgy", np.arange(90, dtype="f4").reshape(9, 10))
    raw = bytearray(path.read_bytes())
    start, length = 3600, 240 + 40
    traces = [bytearray(raw[start + i * length : start + (i + 1) * length]) for i in range(9)]
    traces[4] = traces[4][: 240 + 32]
    traces[6] = traces[6] + bytes(8)
    for i, n in ((4, 8), (6, 12)):
        traces[i][114:116] = n.to_bytes(2, "big")
    (tmp_path / "varying.sgy").write_bytes(bytes(raw[:start]) + b"".join(traces))
    done = run("ingest", tmp_path / "varying.sgy", tmp_path / "v.zarr")
    assert done.returncode == 1
    assert "trace 4 (at byte 4720) says it holds 8 samples (trace header byte 115)" in said(done)
    assert not (tmp_path / "v.zarr").exists()


def test_revision_2_extended_trace_headers_are_refused_naming_byte_3507(tmp_path):
    path = write(tmp_path / "a.sgy", np.zeros((9, 10), "f4"))
    raw = bytearray(path.read_bytes())
    raw[3500:3502] = bytes([2, 0])
    raw[3506:3508] = (1).to_bytes(2, "big")
    (tmp_path / "b.sgy").write_bytes(bytes(raw))
    done = run("ingest", tmp_path / "b.sgy", tmp_path / "b.zarr")
    assert done.returncode == 1 and "1 extended trace headers per trace (byte 3507" in said(done)


def test_a_revision_2_interval_past_32767_us_is_unsigned(tmp_path):
    values = np.arange(90, dtype="f4").reshape(9, 10)
    path = write(tmp_path / "a.sgy", values, interval=40000)
    raw = bytearray(path.read_bytes())
    raw[3500:3502] = bytes([2, 0])
    (tmp_path / "b.sgy").write_bytes(bytes(raw))
    cubeslab.ingest(tmp_path / "b.sgy", tmp_path / "b.zarr")
    cube = cubeslab.open(tmp_path / "b.zarr")
    assert np.array_equal(cube.coords["time"], np.arange(10) * 40.0)
    assert np.array_equal(cube[...].reshape(9, 10), values)


@pytest.mark.parametrize("interval", ["0", "-4000", "nan", "inf"])
def test_a_sample_interval_option_that_cannot_be_right_is_refused(tmp_path, interval):
    path = write(tmp_path / "a.sgy", np.zeros((9, 10), "f4"))
    done = run("ingest", path, tmp_path / "a.zarr", "--sample-interval", interval)
    assert done.returncode == 1
    assert "--sample-interval" in said(done) and "positive number of microseconds" in said(done)
    assert not (tmp_path / "a.zarr").exists()


def test_a_source_that_is_not_a_regular_file_is_refused_without_waiting(tmp_path):
    """A named pipe would make opening wait for a writer for ever; a folder is no file either."""
    os.mkfifo(tmp_path / "pipe.sgy")
    (tmp_path / "folder.sgy").mkdir()
    for source in ("pipe.sgy", "folder.sgy"):
        done = run("ingest", tmp_path / source, tmp_path / "p.zarr", timeout=30)
        assert done.returncode == 1 and "not a regular file" in said(done), said(done)


def test_samples_float32_rounds_are_warned_of_and_found_by_verify_against(tmp_path):
    """int32 samples past 2^24 do not fit float32, the default: the ingest warns, verify --against
    compares with the samples themselves and says the store differs; --dtype native keeps them."""
    values = np.arange(90, dtype="i4").reshape(9, 10) + 16_777_217
    path = write(tmp_path / "i32.sgy", values, fmt=2)
    with pytest.warns(cubeslab.IngestWarning, match=r"samples of format 2 \(int32\) stored as float32"):
        cubeslab.ingest(path, tmp_path / "f.zarr")
    done = run("verify", tmp_path / "f.zarr", "--against", path)
    assert done.returncode == 1
    assert "float32 rounds its samples (ingest with --dtype native" in said(done)
    assert "max |error| 1" in said(done)  # 16777217 read as 16777216
    cubeslab.ingest(path, tmp_path / "n.zarr", dtype="native")
    assert np.array_equal(cubeslab.open(tmp_path / "n.zarr")[...].reshape(9, 10), values)
    assert run("verify", tmp_path / "n.zarr", "--against", path).returncode == 0


def test_float64_samples_stored_as_float32_are_said_to_lose_precision_and_range(tmp_path):
    values = np.tile([1e300, 1.0000000001, -2.5], (9, 1))
    path = write(tmp_path / "f64.sgy", values, fmt=6)
    with pytest.warns(cubeslab.IngestWarning) as caught:
        cubeslab.ingest(path, tmp_path / "f.zarr")
    [said_at_ingest] = [str(w.message) for w in caught if issubclass(w.category, cubeslab.IngestWarning)]
    assert "rounded to float32's 24 significant bits" in said_at_ingest
    assert "past float32's range (3.4e38) becomes infinite" in said_at_ingest
    np.testing.assert_array_equal(
        cubeslab.open(tmp_path / "f.zarr")[...].reshape(9, 3), values.astype("f4")
    )  # float32's own rounding: inf and 1.0
    done = run("verify", tmp_path / "f.zarr", "--against", path)
    assert done.returncode == 1
    assert re.search(r"largest error in chunk .+?: inf lossless", said(done)), said(done)


def test_infinite_samples_kept_exactly_verify_as_exact(tmp_path):
    values = np.arange(90, dtype="f4").reshape(9, 10)
    values[2, 3], values[5, 0] = np.inf, -np.inf
    path = write(tmp_path / "inf.sgy", values)
    cubeslab.ingest(path, tmp_path / "inf.zarr")
    assert np.array_equal(cubeslab.open(tmp_path / "inf.zarr")[...].reshape(9, 10), values)
    done = run("verify", tmp_path / "inf.zarr", "--against", path)
    assert done.returncode == 0 and "max |error| 0" in said(done), said(done)


def test_verify_against_reads_the_source_with_the_ingest_options(tmp_path):
    """A store ingested with --allow-truncated and --sample-interval is verified with both."""
    path = write(tmp_path / "a.sgy", np.arange(90, dtype="f4").reshape(9, 10), interval=0)
    (tmp_path / "cut.sgy").write_bytes(path.read_bytes()[:-100])
    done = run(
        "ingest", tmp_path / "cut.sgy", tmp_path / "c.zarr", "--allow-truncated", "--sample-interval", "2000"
    )
    assert done.returncode == 0, said(done)
    done = run("verify", tmp_path / "c.zarr", "--against", tmp_path / "cut.sgy")
    assert done.returncode == 0, said(done)


def test_the_command_line_refuses_unwritable_outputs_and_impossible_values(tmp_path):
    path = write(tmp_path / "a.sgy", np.zeros((9, 10), "f4"))
    run("ingest", path, tmp_path / "a.zarr")
    (tmp_path / "dir.npy").mkdir()
    for output in (tmp_path / "nowhere" / "il.npy", tmp_path / "dir.npy"):
        done = run("read", tmp_path / "a.zarr", "--inline", "2", "-o", output)
        assert done.returncode == 1 and str(output) in said(done), said(done)
    done = run("read", tmp_path / "a.zarr", "--window", "::0", "-o", tmp_path / "w.npy")
    assert done.returncode == 1 and "slice step cannot be zero" in said(done)
    for option, value in (("--inline-byte", "-5"), ("--crossline-byte", "238"), ("--threads", "-1")):
        done = run("ingest", path, tmp_path / "b.zarr", option, value)
        assert done.returncode == 2 and option in said(done), said(done)
    with pytest.raises(cubeslab.GeometryError, match=r"a\.sgy: inline byte position -5 is outside"):
        cubeslab.ingest(path, tmp_path / "b.zarr", inline_byte=-5)
    with pytest.raises(cubeslab.InvalidInputError, match="threads=0"):
        cubeslab.ingest(path, tmp_path / "b.zarr", threads=0)


def test_an_infill_line_between_the_lines_of_a_decimated_survey_is_ingested_with_a_warning(tmp_path):
    """Inlines 100, 102, ..., 118 of 6 traces each, and one trace of inline 107 between them (an infill
    line begun): off the survey's step, but within its range, so not a damaged header. It was refused
    because its row is mostly empty cells; it is ingested, with a warning naming it."""
    cells = [(il, xl) for il in range(100, 120, 2) for xl in range(1, 7)] + [(107, 3)]
    samples = np.random.default_rng(2).normal(size=(len(cells), 20)).astype("f4")
    spec = segyio.spec()
    spec.format, spec.samples, spec.tracecount = 5, list(range(20)), len(cells)
    path = tmp_path / "infill.sgy"
    with segyio.create(path, spec) as f:
        f.bin[segyio.BinField.Interval] = 4000
        for i, (il, xl) in enumerate(cells):
            f.header[i] = {189: il, 193: xl, segyio.TraceField.TRACE_SAMPLE_INTERVAL: 4000}
            f.trace[i] = samples[i]
    with pytest.warns(cubeslab.IngestWarning, match=r"107 \(trace 60\)"):
        cubeslab.ingest(path, tmp_path / "infill.zarr")
    cube = cubeslab.open(tmp_path / "infill.zarr")
    assert list(cube.coords["inline"]) == sorted({il for il, _ in cells})
    with segyio.open(path, ignore_geometry=True) as f:  # the oracle: each trace by its own headers
        for i in range(f.tracecount):
            il, xl = f.header[i][189], f.header[i][193]
            np.testing.assert_array_equal(
                cube.inline[il][list(cube.coords["crossline"]).index(xl)], f.trace[i]
            )
    assert int(cube.trace_mask.sum()) == len(cells)
