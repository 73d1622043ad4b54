"""Crash consistency: a stopped ingest leaves a store that refuses reads and resumes to the same
result as an uninterrupted run; resuming needs the same source and options."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cubeslab
from cubeslab import _engine

SEGY = Path(__file__).resolve().parent / "data/segy/f3.sgy"
LAYOUT = {"layout": "8x8x8/8x8x24"}  # 3 x 3 x 4 = 36 shards, 9 tasks of 4


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted ingest with the same options (the oracle for resumed ones)."""
    store = tmp_path_factory.mktemp("ref") / "f3.zarr"
    cubeslab.ingest(SEGY, store, **LAYOUT)
    return cubeslab.open(store)


def assert_same_survey(store: Path, reference) -> None:
    cube = cubeslab.open(store)
    assert np.array_equal(cube[...], reference[...])
    assert np.array_equal(cube.headers["CDP_X"], reference.headers["CDP_X"])
    assert np.array_equal(cube.trace_mask, reference.trace_mask)
    for name in ("amplitude", "raw_headers", "trace_mask", "cdp_x"):
        assert not list((store / name).rglob("*.tmp")), "stray temporary files"


@pytest.mark.parametrize("steps_done", [0, 1, 3, 8])
def test_an_ingest_stopped_between_steps_resumes_to_the_uninterrupted_result(tmp_path, reference, steps_done):
    store = tmp_path / "f3.zarr"
    job = _engine.Ingest(str(SEGY), str(store), _engine.IngestOptions(**{**LAYOUT, "threads": 1}))
    for _ in range(steps_done):
        job.step(1)
    del job  # stopped: never finished
    with pytest.raises(cubeslab.IncompleteStoreError, match="--resume"):
        cubeslab.open(store)
    assert cubeslab.ingest(SEGY, store, resume=True, **LAYOUT)["state"] == "complete"
    assert_same_survey(store, reference)


KILLED = textwrap.dedent(
    """
    import json, sys
    from cubeslab import _engine
    options = {"layout": "8x8x8/8x8x24", "threads": 1}
    job = _engine.Ingest(sys.argv[1], sys.argv[2], _engine.IngestOptions(**options))
    while job.step(1):
        print(job.done_tasks, flush=True)
    """
)


@pytest.mark.parametrize("kill_after", [1, 4])
def test_an_ingest_killed_mid_way_resumes_to_the_uninterrupted_result(tmp_path, reference, kill_after):
    store = tmp_path / "f3.zarr"
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(SEGY), str(store)], stdout=subprocess.PIPE, text=True
    )
    for _ in range(kill_after):
        writer.stdout.readline()
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    # The unfinished store is kept under its staging name, never where readers look.
    staging = store.with_name(f".{store.name}.cubeslab-new")
    assert not store.exists() and (staging / "zarr.json").is_file()
    # A file a writer was in the middle of: the resume must clean it, not adopt it.
    (staging / "amplitude" / "c" / "2" / "2").mkdir(parents=True, exist_ok=True)
    (staging / "amplitude" / "c" / "2" / "2" / f"3.{writer.pid}.tmp").write_bytes(b"half a shard")
    with pytest.raises(cubeslab.IncompleteStoreError):
        cubeslab.open(store)
    assert cubeslab.ingest(SEGY, store, resume=True, **LAYOUT)["state"] == "complete"
    assert_same_survey(store, reference)


@pytest.mark.parametrize("resume", [False, True])
def test_a_run_stopped_before_it_wrote_anything_but_its_lock_leaves_nothing_to_resume(
    tmp_path, reference, resume
):
    """Killed between taking the staging folder's lock and writing the store there: the folder holds
    only that lock, of a process gone. Every later run was told to resume, and --resume could not."""
    store = tmp_path / "f3.zarr"
    staging = store.with_name(f".{store.name}.cubeslab-new")
    staging.mkdir()
    gone = subprocess.Popen(["true"])  # a process that has exited: its pid holds nothing
    gone.wait()
    host = Path("/proc/sys/kernel/hostname").read_text().strip()
    (staging / ".cubeslab.lock").write_text(json.dumps({"pid": gone.pid, "host": host}))
    assert cubeslab.ingest(SEGY, store, resume=resume, **LAYOUT)["state"] == "complete"
    assert_same_survey(store, reference)
    assert not staging.exists()


def test_resume_with_other_options_is_refused_and_changes_nothing(tmp_path):
    store = tmp_path / "f3.zarr"
    job = _engine.Ingest(str(SEGY), str(store), _engine.IngestOptions(**{**LAYOUT, "threads": 1}))
    job.step(2)
    del job
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    # Each refusal names the store as asked (not its staging folder) and what differs.
    with pytest.raises(cubeslab.InvalidInputError, match="another source or other options") as refused:
        cubeslab.ingest(SEGY, store, resume=True, layout="16x16x16/16x16x32")
    said = str(refused.value)
    assert said.startswith(f"{store}:") and "chunk_shape: was [8,8,24], now [16,16,32]" in said
    with pytest.raises(cubeslab.InvalidInputError, match=r"compression or inner chunks \(amplitude.codecs\)"):
        cubeslab.ingest(SEGY, store, resume=True, compress="zstd:1", **LAYOUT)
    with pytest.raises(cubeslab.InvalidInputError, match="inline_byte: was 189, now 9"):
        cubeslab.ingest(SEGY, store, resume=True, inline_byte=9, **LAYOUT)
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_resume_of_a_complete_store_is_refused(tmp_path):
    store = tmp_path / "f3.zarr"
    cubeslab.ingest(SEGY, store)
    with pytest.raises(cubeslab.InvalidInputError, match="complete: nothing to resume"):
        cubeslab.ingest(SEGY, store, resume=True)


def test_resume_without_a_store_starts_afresh(tmp_path, reference):
    store = tmp_path / "f3.zarr"
    assert cubeslab.ingest(SEGY, store, resume=True, **LAYOUT)["state"] == "complete"
    assert_same_survey(store, reference)


def test_a_resume_keeps_the_layouts_the_stopped_ingest_chose_though_the_profile_changed(tmp_path):
    """An `auto` ingest stopped, then a new profile measured: the resume must not plan again (its pick
    could differ, and the store would mix two layouts or be refused as 'other options')."""
    from cubeslab.plan import measure_profile, plan
    from cubeslab.synthetic import SyntheticSurvey, write_segy

    src = tmp_path / "s.sgy"
    survey = SyntheticSurvey(96, 80, 300)
    write_segy(src, survey)
    measure_profile(tmp_path, output=tmp_path / "measured.json", quick=True)
    # The same machine with a disk a hundred times slower at small requests.
    slow = json.loads((tmp_path / "measured.json").read_text())
    slow["io"]["cold"] = [[rate / 100 for rate in row] for row in slow["io"]["cold"][:3]] + slow["io"][
        "cold"
    ][3:]
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    picks = [
        plan(survey.shape, profile=tmp_path / p, threads=1)[0]["layout"]
        for p in ("measured.json", "slow.json")
    ]
    assert picks[0] != picks[1], "the two profiles must plan differently for this test to mean anything"
    store = tmp_path / "s.zarr"
    options = {"profile": (tmp_path / "measured.json").read_text(), "threads": 1, "views": ["time"]}
    job = _engine.Ingest(str(src), str(store), _engine.IngestOptions(**options))
    job.step(1)
    del job
    staging = store.with_name(f".{store.name}.cubeslab-new")
    recorded = json.loads((staging / "zarr.json").read_text())["attributes"]["cubeslab"]
    chosen = picks[0]
    assert recorded["plan"]["layout"] == "/".join("x".join(map(str, chosen[k])) for k in ("inner", "shard"))
    summary = cubeslab.ingest(
        src, store, resume=True, profile=tmp_path / "slow.json", threads=1, views=["time"]
    )
    assert summary["state"] == "complete"
    assert summary["plan"]["layout"] == recorded["plan"]["layout"]
    assert summary["views"]["time"]["layout"] == recorded["views"]["time"]["layout"]
    with cubeslab.open(store) as cube:
        np.testing.assert_array_equal(cube[...], survey.volume())


@pytest.mark.parametrize("keep_time", [False, True])
def test_a_source_rewritten_in_place_with_the_same_size_is_refused_on_resume(tmp_path, keep_time):
    """Path and size alone let a resume mix two surveys into one store marked complete."""
    import os

    src = tmp_path / "f3.sgy"
    src.write_bytes(SEGY.read_bytes())
    store = tmp_path / "f3.zarr"
    job = _engine.Ingest(str(src), str(store), _engine.IngestOptions(**{**LAYOUT, "threads": 1}))
    job.step(1)
    del job
    before = src.stat()
    data = bytearray(src.read_bytes())
    first_sample = 3600 + 240  # trace 0's samples: among those the fingerprint checks
    data[first_sample : first_sample + 4] = bytes(a ^ 0x55 for a in data[first_sample : first_sample + 4])
    src.write_bytes(bytes(data))
    if keep_time:
        os.utime(src, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert src.stat().st_size == before.st_size
    with pytest.raises(cubeslab.InvalidInputError, match="another source"):
        cubeslab.ingest(src, store, resume=True, **LAYOUT)


@pytest.mark.parametrize("steps_done", [3, 9])
def test_a_resumed_lossy_ingest_records_the_error_of_the_whole_volume(tmp_path, steps_done):
    """The recorded error covered only the chunks the resume rewrote (max |error| 21.11 where the volume's
    is 44.22), or nothing when it rewrote none."""
    store = tmp_path / "z.zarr"
    lossy = {**LAYOUT, "compress": "zfp:tolerance=8"}
    job = _engine.Ingest(str(SEGY), str(store), _engine.IngestOptions(**{**lossy, "threads": 1}))
    for _ in range(steps_done):
        job.step(1)
    del job
    with pytest.warns(cubeslab.IngestWarning):
        summary = cubeslab.ingest(SEGY, store, resume=True, **lossy)
    achieved = summary["compression"]["achieved"]
    against = cubeslab.verify(store, against=SEGY)["against"]
    assert achieved["max_abs_error"] == against["max_abs_error"]
    assert achieved["rms_error"] == pytest.approx(against["rms_error"], rel=1e-9)
    assert (achieved["values"], achieved["chunks"]) == (against["values"], against["chunks"])


def test_the_arrays_of_an_unfinished_ingest_are_refused_as_the_store_is(tmp_path):
    """cubeslab.Array(store / "amplitude") read an unfinished store's missing shards as NaN."""
    store = tmp_path / "f3.zarr"
    job = _engine.Ingest(str(SEGY), str(store), _engine.IngestOptions(**{**LAYOUT, "threads": 1}))
    job.step(2)
    del job
    for name in ("amplitude", "trace_mask", "cdp_x"):
        with pytest.raises(cubeslab.IncompleteStoreError, match="--resume"):
            cubeslab.Array(store / name)


def test_other_tools_cannot_open_an_unfinished_ingest_as_data(tmp_path):
    """zarr-python and xarray read an unfinished store's missing shards as fill values (61 % NaN):
    the store is kept under a staging name until complete, so at its path there is nothing to read."""
    import xarray as xr
    import zarr

    store = tmp_path / "f3.zarr"
    job = _engine.Ingest(str(SEGY), str(store), _engine.IngestOptions(**{**LAYOUT, "threads": 1}))
    job.step(2)
    del job
    with pytest.raises(FileNotFoundError):
        zarr.open_group(store, mode="r")
    with pytest.raises(FileNotFoundError):
        zarr.open_array(store / "amplitude", mode="r")
    with pytest.raises(FileNotFoundError):
        xr.open_zarr(store, consolidated=False)
    cubeslab.ingest(SEGY, store, resume=True, **LAYOUT)
    opened = xr.open_zarr(store, consolidated=False)
    with cubeslab.open(store) as cube:
        np.testing.assert_array_equal(opened["amplitude"].values, cube[...])
