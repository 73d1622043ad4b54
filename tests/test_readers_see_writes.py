"""An open reader keeps each shard it read mapped: `Array.refresh()` makes it see what another process
wrote since, and the viewer does so at every request, so it never shows planes from before a window write
or an overwrite made elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy
from cubeslab.viewer.app import make_app

CLI = Path(sys.executable).parent / "cubeslab"

SHAPE = (16, 12, 40)


def write_elsewhere(store: Path, plane: int, value: float) -> None:
    """Set inline ``plane`` to ``value`` from another process, through a window write."""
    script = textwrap.dedent(
        f"""
        import cubeslab
        with cubeslab.open({str(store)!r}, mode="r+") as cube:
            cube.amplitude[{plane}] = {value}
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


@pytest.fixture
def store(tmp_path) -> tuple[Path, np.ndarray]:
    values = np.random.default_rng(7).normal(size=SHAPE).astype(np.float32)
    path = tmp_path / "v.zarr"
    dims = ["inline", "crossline", "time"]
    coords = {"inline": np.arange(SHAPE[0])}
    with cubeslab.create(
        path, SHAPE, "float32", dims=dims, coords=coords, chunks=(4, 4, 8), shards=(8, 12, 40)
    ) as cube:
        cube.amplitude[...] = values
    return path, values


def test_an_open_array_sees_another_process_s_writes_after_refresh(store):
    path, values = store
    array = cubeslab.open(path).amplitude
    np.testing.assert_array_equal(array[3], values[3])
    write_elsewhere(path, 3, 5.0)
    np.testing.assert_array_equal(array[3], values[3])  # the shard it mapped: a consistent snapshot
    assert array.refresh() is True
    np.testing.assert_array_equal(array[3], np.full(SHAPE[1:], 5.0, np.float32))
    np.testing.assert_array_equal(array[4], values[4])
    assert array.refresh() is False  # nothing replaced since


def test_an_array_open_for_writing_sees_another_process_s_writes_after_refresh(store):
    """Its unchanged cached chunks are dropped too, so that a partial write after the refresh changes
    the new values, not the ones it read before."""
    path, values = store
    with cubeslab.open(path, mode="r+") as cube:
        cube.amplitude[3, 0, 0] = -1.0
        cube.flush()
        np.testing.assert_array_equal(cube.amplitude[3, 1:], values[3, 1:])
        write_elsewhere(path, 3, 5.0)
        assert cube.refresh() is True
        np.testing.assert_array_equal(cube.amplitude[3], np.full(SHAPE[1:], 5.0, np.float32))
        cube.amplitude[3, 0, 0] = -2.0
    expected = np.full(SHAPE[1:], 5.0, np.float32)
    expected[0, 0] = -2.0
    np.testing.assert_array_equal(cubeslab.open(path).amplitude[3], expected)
    np.testing.assert_array_equal(cubeslab.open(path).amplitude[4], values[4])


def plane(client: TestClient, store_id: str, index: int) -> np.ndarray:
    response = client.get(f"/api/stores/{store_id}/plane?axis=0&index={index}&h={SHAPE[1]}&w={SHAPE[2]}")
    assert response.status_code == 200, response.text
    where = json.loads(response.headers["x-plane"])
    return np.frombuffer(response.content, "<f4").reshape(where["shape"])


def test_the_viewer_shows_window_writes_made_elsewhere_while_it_runs(store):
    path, values = store
    client = TestClient(make_app([str(path)]), base_url="http://127.0.0.1")
    [listed] = client.get("/api/stores").json()
    np.testing.assert_array_equal(plane(client, listed["id"], 3), values[3])
    write_elsewhere(path, 3, -2.0)
    np.testing.assert_array_equal(plane(client, listed["id"], 3), np.full(SHAPE[1:], -2.0, np.float32))


def test_the_viewer_shows_the_new_survey_after_an_overwrite_elsewhere(tmp_path):
    first, second = SyntheticSurvey(10, 8, 30, seed=1), SyntheticSurvey(10, 8, 30, seed=2)
    write_segy(tmp_path / "first.sgy", first)
    write_segy(tmp_path / "second.sgy", second)
    store = tmp_path / "s.zarr"
    cubeslab.ingest(tmp_path / "first.sgy", store)
    client = TestClient(make_app([str(store)]), base_url="http://127.0.0.1")
    [listed] = client.get("/api/stores").json()
    url = f"/api/stores/{listed['id']}/plane?axis=0&index=4&h=8&w=30"

    def shown() -> np.ndarray:
        response = client.get(url)
        assert response.status_code == 200, response.text
        return np.frombuffer(response.content, "<f4").reshape(
            json.loads(response.headers["x-plane"])["shape"]
        )

    np.testing.assert_array_equal(shown(), first.volume()[4])
    done = subprocess.run(
        [str(CLI), "ingest", "--overwrite", str(tmp_path / "second.sgy"), str(store)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(shown(), second.volume()[4])
