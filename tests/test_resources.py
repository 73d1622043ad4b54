"""Resources: ingest memory stays within its bound, thread settings survive fork."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy

MEASURE = textwrap.dedent(
    """
    import json, resource, sys
    import cubeslab
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    summary = cubeslab.ingest(sys.argv[1], sys.argv[2], memory_limit=int(sys.argv[3]),
                              layout="16x16x16/64x64x128", threads=2)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"baseline": baseline, "peak": peak, "state": summary["state"]}))
    """
)


def test_ingest_of_a_file_twice_the_memory_bound_stays_within_the_bound(tmp_path):
    """Peak RSS minus the interpreter's own (Python, numpy, the engine loaded) stays under the bound.

    The stated fixed overhead is that baseline; the engine's own per-trace state (24 bytes per trace
    for the header scan, 8 per grid cell) is inside the bound here (a few hundred KB)."""
    sgy = tmp_path / "big.sgy"
    survey = SyntheticSurvey(128, 200, 1000)
    write_segy(sgy, survey)
    bound = 48 << 20
    assert sgy.stat().st_size >= 2 * bound
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(sgy), str(tmp_path / "big.zarr"), str(bound)],
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(result.stdout)
    assert measured["state"] == "complete"
    used = measured["peak"] - measured["baseline"]
    assert used <= bound, (
        f"ingest used {used / 2**20:.1f} MiB over the baseline, bound {bound / 2**20:.0f} MiB"
    )
    # And the data is right (the synthetic survey is its own oracle).
    cube = cubeslab.open(tmp_path / "big.zarr")
    assert np.array_equal(cube.inline[int(survey.inlines[77])], survey.block(77, 78)[0])


def test_reads_work_in_a_forked_child_after_the_parent_used_the_thread_pool(tmp_path):
    data = np.arange(40 * 50 * 60, dtype=np.float32).reshape(40, 50, 60)
    array = cubeslab.Array.from_numpy(tmp_path / "a.zarr", data, chunks=(8, 8, 8), shards=(16, 16, 16))
    assert np.array_equal(array[3], data[3])  # the parent's pool exists now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: must not wait for the parent's (absent) worker threads
        os.close(read)
        ok = np.array_equal(array[:, 7], data[:, 7]) and np.array_equal(array.read((), threads=2), data)
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer == b"1"


HOLD = textwrap.dedent(
    """
    import json, sys, time
    from cubeslab import _engine
    options = {"layout": "8x8x8/8x8x24", "threads": 1}
    job = _engine.Ingest(sys.argv[1], sys.argv[2], _engine.IngestOptions(**options))
    job.step(1)
    print("holding", flush=True)
    time.sleep(120)
    """
)


def test_a_store_being_written_by_a_live_process_is_not_replaced(tmp_path):
    """Concurrent writers: one writer per store; a dead writer's lock is stale and taken over."""
    src = Path(__file__).resolve().parent / "data/segy/f3.sgy"
    store = tmp_path / "f3.zarr"
    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(src), str(store)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "holding"
        with pytest.raises(cubeslab.StoreBusyError, match=rf"being written by process {writer.pid}") as info:
            cubeslab.ingest(src, store, overwrite=True)
        assert isinstance(info.value, OSError)
        # The writer's store (under its staging name until complete) is still there.
        assert (store.with_name(f".{store.name}.cubeslab-new") / "zarr.json").is_file()
    finally:
        writer.kill()
        writer.wait()
    # The writer died holding the lock: the next ingest takes it over and completes.
    assert cubeslab.ingest(src, store, overwrite=True)["state"] == "complete"
    assert not (store / ".cubeslab.lock").exists()
    assert cubeslab.open(store).shape == (23, 18, 75)


def test_threads_beyond_four_per_core_are_capped_with_a_warning(tmp_path):
    """A huge CUBESLAB_THREADS made one time slice take 23 s; the engine caps it and says so."""
    import subprocess
    import sys

    code = (
        "import warnings, numpy as np, cubeslab\n"
        "from cubeslab import _engine\n"
        "threads, limit = _engine.default_parallelism()[0], _engine.parallelism_limits()[0]\n"
        "assert threads == limit == 4 * __import__('os').cpu_count(), (threads, limit)\n"
        f"a = cubeslab.Array.from_numpy({str(tmp_path / 'a.zarr')!r}, np.arange(64.0).reshape(4, 4, 4),\n"
        "    chunks=(4, 4, 4))\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    assert a.read((slice(None), 1, slice(None)), threads=100000).shape == (4, 4)\n"
        "assert any('threads=100000' in str(w.message) for w in seen), seen\n"
    )
    env = {**os.environ, "CUBESLAB_THREADS": "4096"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "CUBESLAB_THREADS: threads=4096 is more than cubeslab uses" in run.stderr
