"""What the ``cubeslab`` command tells the shell, run as a subprocess of the installed entry point:
0 success, 1 a cubeslab error (named), 2 a usage error (the option named, no traceback), 130 an
interrupt (with a line on --resume), and never a success for a store that has problems."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy

CLI = Path(sys.executable).parent / "cubeslab"


def cubeslab_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture
def small_store(segy_dir, tmp_path):
    store = tmp_path / "small.zarr"
    cubeslab.ingest(segy_dir / "small.sgy", store)
    return store


def test_version_prints_the_package_version_and_exits_0():
    result = cubeslab_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"cubeslab {cubeslab.__version__}"


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["ingest", "{src}", "{out}", "--memory-limit", "1 furlong"], "--memory-limit"),
        (["ingest", "{src}", "{out}", "--memory-limit", "-5MiB"], "--memory-limit"),
        (["ingest", "{src}", "{out}", "--threads", "abc"], "--threads"),
        (["ingest", "{src}", "{out}", "--layout", "pyramid"], "--layout"),
        (["ingest", "{src}", "{out}", "--endian", "middle"], "--endian"),
        (["demo", "--size", "medium"], "--size"),
        (["read", "{out}", "--inline", "1", "-o", "il.txt"], "--output"),
        (["ingest", "{src}", "{out}", "--no-such-option"], "--no-such-option"),
    ],
)
def test_a_bad_option_value_is_a_usage_error_naming_the_option(segy_dir, tmp_path, args, option):
    filled = [a.format(src=segy_dir / "small.sgy", out=tmp_path / "out.zarr") for a in args]
    result = cubeslab_cli(*filled)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert option in result.stderr, result.stderr
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        (["plan", "--shape", "-5,10,10"], "--shape", "'-5,10,10'"),
        (["plan", "--shape", "a,b"], "--shape", "'a,b'"),
        (["plan", "--shape", "1e3,2,2"], "--shape", "'1e3,2,2'"),
        (["plan", "--shape", "0,10,10"], "--shape", "'0,10,10'"),
        (["plan", "--shape", "10,10,10", "--top", "-1"], "--top", "-1"),
        (["plan", "--shape", "10,10,10", "--top", "0"], "--top", "0"),
        (["plan", "--shape", "10,10,10", "--state", "bogus"], "--state", "'bogus'"),
        (["plan", "--shape", "10,10,10", "--dtype", "bogus"], "--dtype", "'bogus'"),
        (["view", "{out}", "--port", "70000"], "--port", "70000"),
        (["view", "{out}", "--port", "-1"], "--port", "-1"),
        (["ingest", "{raw}", "{out}", "--shape", "-5,10,10", "--dtype", "f4"], "--shape", "-5"),
        (["ingest", "{raw}", "{out}", "--shape", "4,4", "--dtype", "bogus"], "--dtype", "'bogus'"),
        (["ingest", "{raw}", "{out}", "--shape", "4,4", "--dtype", "f4", "--offset", "-1"], "--offset", "-1"),
    ],
)
def test_a_value_out_of_its_option_s_range_is_a_usage_error_naming_both(tmp_path, args, option, value):
    (tmp_path / "a.raw").write_bytes(bytes(64))
    result = cubeslab_cli(*(a.format(out=tmp_path / "out.zarr", raw=tmp_path / "a.raw") for a in args))
    assert result.returncode == 2, result.stdout + result.stderr
    said = " ".join(result.stderr.split())
    assert "Traceback" not in said and option in said and value in said, said
    assert said.isascii(), said  # no emoji


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["plan", "s3://b/k.zarr"], "s3://b/k.zarr: plan works on stores on this machine"),
        (
            ["verify", "{out}", "--against", "s3://b/f.sgy"],
            "s3://b/f.sgy: --against reads a file on this machine",
        ),
    ],
)
def test_a_url_where_a_local_file_is_read_is_refused_naming_it_whole(tmp_path, args, said):
    """A URL taken as a path lost a slash (s3:/b/k.zarr) and was said to be missing."""
    cubeslab.create(tmp_path / "out.zarr", (2, 2)).close()
    result = cubeslab_cli(*(a.format(out=tmp_path / "out.zarr") for a in args))
    assert result.returncode == 1, result.stdout + result.stderr
    assert said in " ".join(result.stderr.split()), result.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["export", "{store}", "{tmp}/x.h5", "--compress", "zstd"], "--compress 'zstd'"),
        (["export", "{store}", "{tmp}/x.npy", "--compress", "deflate:2"], "compress="),
        (["pyramid", "{store}", "--method", "median"], "method='median'"),
        (["pyramid", "{store}", "--axes", "bogus"], "axes: 'bogus'"),
        (["ingest", "{src}", "{tmp}/o.zarr", "--compress", "zfp", "--max-error", "abc"], "max-error"),
        (["ingest", "{tmp}/a.npy", "{tmp}/o.zarr", "--inline-byte", "17"], "inline"),
        (["ingest", "{tmp}/a.npy", "{tmp}/o.zarr", "--max-error", "0.5%"], "a SEG-Y ingest tunes it"),
        (
            ["ingest", "{tmp}/a.npy", "{tmp}/o.zarr", "--compress", "zfp:snr=40"],
            "zfp:snr=40 is an error target",
        ),
    ],
)
def test_an_option_value_the_command_cannot_use_is_a_usage_error(
    segy_dir, small_store, tmp_path, args, named
):
    np.save(tmp_path / "a.npy", np.zeros((3, 4), np.float32))
    filled = [a.format(src=segy_dir / "small.sgy", store=small_store, tmp=tmp_path) for a in args]
    before = sorted(p.name for p in tmp_path.iterdir())
    result = cubeslab_cli(*filled)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert named in " ".join(result.stderr.split()), result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("address", ["foo", "http://scheduler:8786", "tcp://scheduler:", "tcp://:8786"])
def test_a_malformed_scheduler_address_is_a_usage_error_said_at_once(segy_dir, tmp_path, address):
    started = time.monotonic()
    result = cubeslab_cli("ingest", segy_dir / "small.sgy", tmp_path / "out.zarr", "--scheduler", address)
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert "--scheduler" in said and repr(address) in said and "Traceback" not in said, said
    assert time.monotonic() - started < 8  # no connection tried, no client left to time out
    assert not list(tmp_path.iterdir())


def test_a_scheduler_that_does_not_answer_is_said_without_a_wait_or_a_traceback_after(segy_dir, tmp_path):
    from cubeslab.cluster_ingest import CONNECT_SECONDS
    from cubeslab_bench.s3_server import free_port

    address = f"tcp://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = cubeslab_cli("ingest", segy_dir / "small.sgy", tmp_path / "out.zarr", "--scheduler", address)
    assert result.returncode == 1, result.stderr
    assert "no Dask scheduler answers" in result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    assert time.monotonic() - started < CONNECT_SECONDS + 8  # not twice the timeout more, closing


def test_memory_limit_takes_binary_units_with_or_without_the_i(segy_dir, tmp_path):
    from cubeslab.cli import parse_size

    assert parse_size("1G") == parse_size("1GiB") == 1 << 30
    assert parse_size("512m") == 512 << 20
    assert parse_size("2e9") == 2_000_000_000
    assert parse_size("1.5 GB") == 1_500_000_000


def test_a_cubeslab_error_exits_1_with_a_message_naming_the_file(tmp_path):
    missing = tmp_path / "no-such.sgy"
    result = cubeslab_cli("ingest", missing, tmp_path / "out.zarr")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "no-such.sgy" in result.stderr


@pytest.mark.parametrize("option", [["--dataset", "/x"], ["--variable", "v"], ["--hdu", "1"]])
def test_a_missing_source_is_said_to_be_missing_whatever_the_options(tmp_path, option):
    result = cubeslab_cli("ingest", tmp_path / "missing.h5", tmp_path / "out.zarr", *option)
    assert result.returncode == 1, result.stderr
    assert "missing.h5: no such file" in " ".join(result.stderr.split())
    assert not (tmp_path / "out.zarr").exists()


def test_a_store_that_cannot_be_made_where_asked_is_named_as_asked(segy_dir, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    result = cubeslab_cli("ingest", segy_dir / "small.sgy", tmp_path / "a-file" / "out.zarr")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert "a-file/out.zarr:" in message and "cubeslab-new" not in message


def test_verify_of_a_corrupted_store_exits_1_saying_problems_found(small_store):
    shard = next(p for p in (small_store / "amplitude" / "c").rglob("*") if p.is_file())
    data = bytearray(shard.read_bytes())
    data[len(data) // 3] ^= 0xFF
    shard.write_bytes(bytes(data))
    result = cubeslab_cli("verify", small_store)
    assert result.returncode == 1, result.stdout
    assert "problems found" in result.stdout


def test_verify_of_an_incomplete_store_exits_1(small_store):
    shard = next(p for p in (small_store / "amplitude" / "c").rglob("*") if p.is_file())
    shard.unlink()
    result = cubeslab_cli("verify", small_store)
    assert result.returncode == 1, result.stdout
    assert "problems found" in result.stdout


def test_verify_of_a_good_store_exits_0_and_lists_no_absent_shards(small_store):
    result = cubeslab_cli("verify", small_store, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    import json

    report = json.loads(result.stdout)
    absent = {name: a["absent_shards"] for name, a in report["arrays"].items() if a["absent_shards"]}
    assert absent == {}


def test_ctrl_c_during_an_ingest_exits_130_says_resume_and_leaves_an_incomplete_store(tmp_path):
    src = tmp_path / "big.sgy"
    survey = SyntheticSurvey(200, 200, 1000)  # 160 MB of samples: seconds on one thread
    write_segy(src, survey)
    store = tmp_path / "big.zarr"
    proc = subprocess.Popen(
        [str(CLI), "ingest", str(src), str(store), "--threads", "1", "--compress", "zstd:9"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
        # A shell runs background jobs with Ctrl-C ignored, and Python then never installs its
        # handler: the child gets Ctrl-C as a user's terminal would deliver it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    # Interrupt once the store exists (under its staging name until complete), i.e. after the
    # scan, while shards are being written.
    staging = store.with_name(f".{store.name}.cubeslab-new")
    while not (staging / "amplitude" / "zarr.json").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "--resume" in stderr
    with pytest.raises(cubeslab.IncompleteStoreError):
        cubeslab.open(store)
    resumed = cubeslab_cli("ingest", src, store, "--resume", "--threads", "1", "--compress", "zstd:9")
    assert resumed.returncode == 0, resumed.stderr
    with cubeslab.open(store) as cube:
        np.testing.assert_array_equal(cube[7], survey.volume()[7])
        np.testing.assert_array_equal(cube[:, :, 500], survey.volume()[:, :, 500])


@pytest.mark.parametrize("name", ["x.npy", "x.h5", "x.sgy"])
def test_an_export_into_a_folder_that_does_not_exist_names_it(small_store, tmp_path, name):
    result = cubeslab_cli("export", small_store, tmp_path / "nope" / name)
    assert result.returncode == 1, result.stderr
    assert f"its folder {tmp_path / 'nope'} does not exist" in " ".join(result.stderr.split())
    assert ".tmp" not in result.stderr and not (tmp_path / "nope").exists()


def test_a_label_the_survey_lacks_is_named_with_the_store_as_typed(small_store, tmp_path):
    result = cubeslab_cli("read", small_store, "--inline", "5000", "-o", tmp_path / "il.npy")
    assert result.returncode == 1, result.stderr
    said = " ".join(result.stderr.split())
    assert f"{small_store}: inline 5000 is not in this survey" in said, said
    assert not (tmp_path / "il.npy").exists()
