"""What an ingest tells its user while it runs and after: each phase with a true total, warnings
as Python warnings, and a source read once by default."""

from __future__ import annotations

import json

import numpy as np
import pytest
import segyio

import cubeslab
from cubeslab.jobs import Phase
from cubeslab.synthetic import SyntheticSurvey, write_segy

TRACE_HEADER = 240


@pytest.fixture(scope="module")
def survey(tmp_path_factory):
    path = tmp_path_factory.mktemp("progress") / "survey.sgy"
    write_segy(path, SyntheticSurvey(40, 30, 120))
    return path


def test_every_phase_is_reported_in_order_and_counts_to_its_true_total(survey, tmp_path):
    seen: list[Phase] = []
    cubeslab.ingest(
        survey, tmp_path / "s.zarr", compress="zfp:snr=30", views=["inline", "time"], progress=seen.append
    )
    names = list(dict.fromkeys(p.name for p in seen))
    assert names == [
        "scan headers",
        "plan layout",
        "tune compression",
        "write volume",
        "write amplitude_inline",
        "write amplitude_time",
    ]
    with segyio.open(survey) as f:
        traces, samples = f.tracecount, len(f.samples)
    final = {p.name: p for p in seen}  # the last report of each phase
    assert (final["scan headers"].unit, final["scan headers"].total) == ("items", traces)
    assert final["write volume"].unit == "bytes"
    assert final["write volume"].total == traces * (TRACE_HEADER + 4 * samples)
    for view in ("write amplitude_inline", "write amplitude_time"):
        assert final[view].total == traces * samples * 4
    for phase in final.values():
        assert phase.done == phase.total, phase
    assert all(p.done <= p.total for p in seen)
    numbers = [p.number for p in seen]
    assert numbers == sorted(numbers)


def test_the_command_line_says_each_phase_in_a_line_where_stderr_is_no_terminal(survey, tmp_path):
    """Bars print nothing into a log or a pipe: there, a line as each phase ends, with its amount."""
    import subprocess
    import sys
    from pathlib import Path

    path = survey
    cli = Path(sys.executable).with_name("cubeslab")
    done = subprocess.run(
        [str(cli), "ingest", str(path), str(tmp_path / "s.zarr")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    for phase in ("scan headers", "plan layout", "write volume"):
        assert any(line.startswith(f"{phase}: ") and " in " in line for line in lines), done.stderr
    written = next(line for line in lines if line.startswith("write volume: "))
    amount = written.split(": ")[1].split(" in ")[0]
    assert amount.split("/")[0] == amount.split("/")[1]  # the phase ran to its total


def test_the_default_ingest_reads_its_source_once(survey, tmp_path):
    summary = cubeslab.ingest(survey, tmp_path / "s.zarr")
    assert summary["source_passes"] == 1


def test_an_ingest_warning_is_a_python_warning(segy_dir, tmp_path):
    with pytest.warns(cubeslab.IngestWarning, match="samples per trace"):
        summary = cubeslab.ingest(segy_dir / "f3-lsb.sgy", tmp_path / "s.zarr")
    assert summary["warnings"]


def test_a_small_memory_limit_plans_shards_that_fit_it_and_reads_the_source_once(tmp_path):
    src = tmp_path / "wide.sgy"
    survey = SyntheticSurvey(200, 160, 400)  # 51 MB of samples
    write_segy(src, survey)
    limit = 8 << 20
    summary = cubeslab.ingest(src, tmp_path / "s.zarr", memory_limit=limit)
    assert summary["source_passes"] == 1
    _inner, shard = ([int(x) for x in side.split("x")] for side in summary["plan"]["layout"].split("/"))
    column = shard[0] * shard[1] * 400 * 4
    assert column <= limit
    with cubeslab.open(tmp_path / "s.zarr") as cube:
        np.testing.assert_array_equal(cube[:, 80, :], survey.volume()[:, 80, :])


def test_a_large_ingest_onto_an_unprofiled_disk_measures_a_quick_profile_once(survey, tmp_path, monkeypatch):
    import cubeslab.plan
    import cubeslab.profiles

    profiles = tmp_path / "profiles"
    monkeypatch.setenv("CUBESLAB_PROFILE_DIR", str(profiles))
    monkeypatch.setenv("CUBESLAB_AUTO_PROFILE", "1")
    monkeypatch.setattr(cubeslab.plan, "AUTO_PROFILE_MIN_BYTES", survey.stat().st_size)
    seen: list[Phase] = []
    cubeslab.ingest(survey, tmp_path / "a.zarr", progress=seen.append)
    assert seen[0].name == "measure this disk (once)"
    saved = cubeslab.profiles.profile_path(tmp_path)
    assert saved.is_file()
    assert json.loads(saved.read_text())["quick"] is True
    stamp = saved.stat().st_mtime_ns
    again: list[Phase] = []
    cubeslab.ingest(survey, tmp_path / "b.zarr", progress=again.append)
    assert "measure this disk (once)" not in {p.name for p in again}
    assert saved.stat().st_mtime_ns == stamp
    monkeypatch.setattr(cubeslab.plan, "AUTO_PROFILE_MIN_BYTES", survey.stat().st_size + 1)
    monkeypatch.setenv("CUBESLAB_PROFILE_DIR", str(tmp_path / "other"))
    cubeslab.ingest(survey, tmp_path / "c.zarr")  # smaller than the threshold: nothing measured
    assert not (tmp_path / "other").exists()


def test_the_amplitude_statistics_are_recorded_as_mdio_records_them(segy_dir, mdio_f3, tmp_path):
    with pytest.warns(cubeslab.IngestWarning):
        cubeslab.ingest(segy_dir / "f3.sgy", tmp_path / "f3.zarr")
    with segyio.open(segy_dir / "f3.sgy") as f:
        cube = segyio.tools.cube(f).astype(np.float64)
    ours = json.loads(cubeslab.open(tmp_path / "f3.zarr").to_xarray().amplitude.attrs["statsV1"])
    assert ours["count"] == cube.size
    assert ours["sum"] == cube.sum() and ours["sumSquares"] == (cube**2).sum()
    assert (ours["min"], ours["max"]) == (cube.min(), cube.max())
    mdio = json.loads(json.loads((mdio_f3 / "amplitude" / "zarr.json").read_text())["attributes"]["statsV1"])
    for key in ("sum", "sumSquares", "min", "max"):
        assert ours[key] == mdio[key], key


def test_units_are_recorded_on_the_vertical_axis_and_the_coordinates(segy_dir, tmp_path):
    with pytest.warns(cubeslab.IngestWarning):
        cubeslab.ingest(segy_dir / "f3.sgy", tmp_path / "t.zarr")
    ds = cubeslab.open(tmp_path / "t.zarr").to_xarray()
    assert ds["time"].attrs["unitsV1"] == {"time": "ms"}
    assert ds["cdp_x"].attrs["unitsV1"] == {"length": "m"}
    cubeslab.ingest(segy_dir / "small.sgy", tmp_path / "d.zarr", vertical="depth")
    assert cubeslab.open(tmp_path / "d.zarr").to_xarray()["depth"].attrs["unitsV1"] == {"length": "m"}


def test_a_resumed_ingest_records_no_statistics_it_did_not_gather(survey, tmp_path):
    store = tmp_path / "r.zarr"
    job = cubeslab._engine.Ingest(
        str(survey), str(store), cubeslab._engine.IngestOptions(**{"layout": "8x8x40/8x8x120"})
    )
    job.step(1)
    del job  # stopped after one task: the store stays incomplete
    summary = cubeslab.ingest(survey, store, layout="8x8x40/8x8x120", resume=True)
    assert summary["state"] == "complete"
    assert "statsV1" not in json.loads((store / "amplitude" / "zarr.json").read_text())["attributes"]
