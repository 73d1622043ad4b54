"""The layout planner from the outside: profiles, plans, layout strategies at ingest, orientation
copies (--views) and the routing of reads among them. Oracles: segyio for the data read back,
numpy for windows, the published formula worked by hand, and the planner's own invariants."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import segyio
import zarr
from test_cli import assert_png, run

import cubeslab
from cubeslab.errors import InvalidInputError
from cubeslab.plan import measure_profile, plan
from cubeslab.profiles import find_profile, profile_path

F3 = Path(__file__).resolve().parent / "data" / "segy" / "f3.sgy"


@pytest.fixture(scope="module")
def f3_cube():
    with segyio.open(F3) as f:
        return segyio.tools.cube(f)


# -- plans ------------------------------------------------------------------------------------------
def test_plan_ranks_layouts_by_their_slowest_access():
    plans = plan((600, 800, 1000), "float32", top=10)
    assert len(plans) == 10
    scores = [p["score"] for p in plans]
    assert scores == sorted(scores)
    for p in plans:
        assert [a["access"] for a in p["accesses"]] == ["inline", "crossline", "time"]
        # The slowest cold access plus the slowest warm one (maybe another), warm weighed by how many
        # times faster memory is than the disk: the same for every layout of one plan.
        assert p["weights"] == plans[0]["weights"]
        k = p["weights"]["warm"]
        assert k > 1 and p["weights"]["cold"] == 1
        slowest = {s: max(a[s]["seconds"] for a in p["accesses"]) for s in ("warm", "cold")}
        assert p["score"] == pytest.approx(slowest["cold"] + k * slowest["warm"])
        assert p["padding"] <= 0.02
        inner, shard = p["layout"]["inner"], p["layout"]["shard"]
        assert all(s % c == 0 for c, s in zip(inner, shard, strict=True))


def test_reference_001_reproduces_the_published_chunk_shape():
    # The Pyrus chunk-shape study's volume and formula (2 MiB, ratio 2, asymmetry 2.5): worked by hand,
    # 12413 chunks -> 24 per axis -> 1966/24*sqrt(2)*2.5, 1103/24*sqrt(2)/2.5, 3001/24/2.
    (p,) = plan((1966, 1103, 3001), "float32", layout="pyrus-formula")
    assert p["layout"]["inner"] == [289, 25, 62]


def test_cost_model_predicts_more_time_for_more_work():
    # A time slice through chunks 64 deep moves 64x the bytes of one through chunks 1 deep.
    (deep,) = plan((256, 256, 256), layout="16x16x64", access="time")
    (flat,) = plan((256, 256, 256), layout="64x64x1", access="time")
    d, f = deep["accesses"][0], flat["accesses"][0]
    assert d["cold"]["touched_bytes"] == pytest.approx(64 * f["cold"]["touched_bytes"], rel=1e-3)  # + crc32c
    assert d["cold"]["seconds"] > 5 * f["cold"]["seconds"]
    assert d["warm"]["seconds"] > 3 * f["warm"]["seconds"]  # the output costs both the same


@pytest.mark.parametrize(
    ("access", "check"),
    [
        ("time", lambda inner: inner[2] == 1),
        ("inline", lambda inner: inner[0] == 1),
        ("spectra:5", lambda inner: inner[0] * inner[1] <= 64),
    ],
)
def test_a_single_access_gets_a_layout_made_for_it(access, check):
    (best,) = plan((200, 200, 400), access=access, top=1)
    assert check(best["layout"]["inner"]), best["layout"]


def test_bad_plan_options_are_named():
    with pytest.raises(InvalidInputError, match="unknown layout"):
        plan((10, 10, 10), layout="fast")
    with pytest.raises(InvalidInputError, match="unknown access"):
        plan((10, 10, 10), access="diagonal")
    with pytest.raises(InvalidInputError, match="3 dimensions"):
        plan((10, 10, 10), layout="4x4")


def test_plan_command_prints_the_pick_runners_up_and_explains(tmp_path):
    out = run("plan", "--shape", "300,400,500", "--top", "3", "--explain").stdout
    assert "layouts, best first" in out and "the pick, explained" in out
    assert "built-in typical machine" in out
    # Each warm / cold cell of the 3 layouts x 3 accesses stays on one line, and the explanation's
    # headings are whole, on an 80-column pipe (rich would rather wrap cells and cut headings short).
    assert len(re.findall(r"\d / \d", out)) >= 9
    assert all(f" {h} " in out for h in ("chunks", "shards", "reqs", "device", "touched", "output", "cpu"))
    for access in ("inline", "crossline", "time"):
        assert access in out
    printed = json.loads(run("plan", str(F3), "--json", "--layout", "cube:8").stdout)
    assert printed["plans"][0]["layout"]["inner"] == [8, 8, 8] and printed["store"] is None
    run("plan", "--shape", "10,10,10", "--layout", "nope", expect=2)  # a bad option value: usage
    run("plan", expect=2)


# -- profiles ---------------------------------------------------------------------------------------
def test_profile_command_measures_saves_and_plots(tmp_path):
    target, png = tmp_path / "p.json", tmp_path / "qd.png"
    out = run("profile", str(tmp_path), "--quick", "--output", str(target), "--plot", str(png)).stdout
    assert "cold reads" in out and "codecs" in out
    assert_png(png)
    profile = json.loads(target.read_text())
    io = profile["io"]
    assert len(io["sizes"]) == 7 and len(io["depths"]) == 7
    assert io["sizes"][0] == 4096 and io["sizes"][-1] == 16 << 20 and io["depths"][-1] == 64
    cold = np.array(io["cold"])
    assert (cold > 0).all()
    assert (np.diff(cold, axis=1) >= 0).all()  # the envelope: no dips with depth
    assert {c["name"] for c in profile["codecs"]} >= {"zstd:1", "gzip:5", "blosc-lz4:5", "zfp:rate=8"}
    assert profile["memory"]["copy"] > 1e8
    # No scratch files are left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "qd.png"]
    # A plan with that profile says so.
    out = run("plan", "--shape", "100,100,100", "--profile", str(target)).stdout
    assert "measured profile" in out
    # --json prints the profile alone, naming where it was saved.
    again = tmp_path / "again.json"
    printed = json.loads(run("profile", str(tmp_path), "--quick", "--json", "--output", str(again)).stdout)
    assert printed.pop("saved_to") == str(again) and printed == json.loads(again.read_text())


def test_profiles_are_found_per_filesystem_and_explicit_files_win(tmp_path, monkeypatch):
    assert find_profile(tmp_path) is None
    saved = measure_profile(tmp_path, quick=True)
    assert Path(saved["saved_to"]) == profile_path(tmp_path)
    assert json.loads(find_profile(tmp_path / "new-store.zarr"))["path"] == str(tmp_path)
    other = tmp_path / "other.json"
    other.write_text(Path(saved["saved_to"]).read_text().replace(str(tmp_path), "/elsewhere"))
    assert json.loads(find_profile(tmp_path, profile=other))["path"] == "/elsewhere"
    monkeypatch.setenv("CUBESLAB_PROFILE", str(other))
    assert json.loads(find_profile(tmp_path))["path"] == "/elsewhere"
    with pytest.raises(InvalidInputError, match="no such profile"):
        find_profile(tmp_path, profile=tmp_path / "missing.json")
    os.remove(saved["saved_to"])


# -- layouts at ingest ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("layout", "inner"), [("cube:8", (8, 8, 8)), ("4x6x25", (4, 6, 25)), ("8x8x16/16x16x32", (8, 8, 16))]
)
def test_ingest_takes_a_layout_strategy(tmp_path, f3_cube, layout, inner):
    summary = cubeslab.ingest(F3, tmp_path / "s.zarr", layout=layout)
    assert summary["plan"]["strategy"] == layout
    cube = cubeslab.open(tmp_path / "s.zarr")
    assert cube.amplitude.chunks == inner
    assert np.array_equal(cube[...], f3_cube)


def test_auto_layout_is_the_plans_pick(tmp_path, f3_cube):
    summary = cubeslab.ingest(F3, tmp_path / "s.zarr")
    (pick,) = plan(f3_cube.shape, top=1)
    cube = cubeslab.open(tmp_path / "s.zarr")
    assert list(cube.amplitude.chunks) == pick["layout"]["inner"]
    assert list(cube.amplitude.shards) == pick["layout"]["shard"]
    assert summary["plan"]["strategy"] == "auto"
    assert set(summary["plan"]["predicted_ms"]) == {"inline", "crossline", "time"}
    assert np.array_equal(cube[...], f3_cube)


def test_bad_layout_at_ingest_is_a_usage_error(tmp_path):
    result = run("ingest", str(F3), str(tmp_path / "x.zarr"), "--layout", "4x4", expect=1)
    assert "3 dimensions" in result.stderr or "dimensions" in result.stderr
    assert not (tmp_path / "x.zarr").exists()


# -- orientation copies -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def views_store(tmp_path_factory):
    store = tmp_path_factory.mktemp("views") / "f3.zarr"
    result = run("ingest", str(F3), str(store), "--views", "inline,crossline,time")
    return store, result.stdout


def test_views_are_written_reported_and_read_identically(views_store, f3_cube):
    store, out = views_store
    assert out.count("view for") == 3 and "of the volume on disk" in out
    cube = cubeslab.open(store)
    views = cube.attributes["cubeslab"]["views"]
    assert set(views) == {"inline", "crossline", "time"}
    for access, view in views.items():
        copy = cubeslab.Array(store / view["array"])
        assert np.array_equal(copy[...], f3_cube), access  # every copy holds the volume
        assert view["stored_bytes"] > 0
    info = run("info", str(store)).stdout
    assert "views" in info and "inline" in info
    # Every plane, every index, through the router: what segyio reads.
    for i in range(cube.shape[0]):
        assert np.array_equal(cube[i], f3_cube[i])
    for j in range(cube.shape[1]):
        assert np.array_equal(cube[:, j], f3_cube[:, j])
    for k in range(cube.shape[2]):
        assert np.array_equal(cube[:, :, k], f3_cube[:, :, k])
    assert np.array_equal(cube[3:9, ::2, 10:40:3], f3_cube[3:9, ::2, 10:40:3])


def test_a_plan_for_a_store_sets_its_layouts_beside_the_pick(views_store):
    store, _ = views_store
    printed = json.loads(run("plan", str(store), "--json").stdout)
    copies = printed["store"]["copies"]
    assert [c["name"] for c in copies] == ["volume", "inline view", "crossline view", "time view"]
    # Each copy's layout is what zarr-python reads from the store's metadata.
    views = cubeslab.open(store).attributes["cubeslab"]["views"]
    arrays = ["amplitude"] + [views[a]["array"] for a in ("inline", "crossline", "time")]
    for copy, name in zip(copies, arrays, strict=True):
        array = zarr.open_array(store / name, mode="r")
        assert copy["layout"] == "x".join(map(str, array.chunks)) + "/" + "x".join(map(str, array.shards))
        assert copy["plan"]["layout"] == {"inner": list(array.chunks), "shard": list(array.shards)}
    # Each access is read from its fastest copy: each view predicts its own plane fastest, and the
    # store's slowest access is never slower than the volume's alone.
    for i, access in enumerate(("inline", "crossline", "time")):
        times = [c["plan"]["accesses"][i]["objective"] for c in copies]
        assert min(times) == times[1 + i], access
    assert printed["store"]["score"] <= copies[0]["plan"]["score"]
    assert printed["store"]["compression"] == "none"
    out = run("plan", str(store)).stdout
    assert "this store's" in out and "time view" in out and "fastest copy" in out


def test_a_plan_for_a_store_with_a_poor_layout_says_how_much_the_pick_gains(tmp_path):
    store = tmp_path / "thin.zarr"
    cubeslab.ingest(F3, store, layout="1x1x75/1x18x75", compress="zstd:1")
    printed = json.loads(run("plan", str(store), "--json").stdout)
    (volume,) = printed["store"]["copies"]
    assert printed["store"]["compression"] == "zstd:1"  # the store's own, unless --compress says
    assert printed["store"]["score"] == pytest.approx(volume["plan"]["score"])
    gain = printed["store"]["score"] / printed["plans"][0]["score"]
    assert gain > 2
    out = run("plan", str(store)).stdout
    assert f"{gain:.1f}x faster. Ingest {F3} again" in " ".join(out.split())
    other = json.loads(run("plan", str(store), "--json", "--compress", "none").stdout)
    assert other["store"]["compression"] == "none"


def test_a_plan_for_a_store_written_by_zarr_python_reads_its_codecs(tmp_path):
    data = np.arange(40 * 50 * 60, dtype=np.float32).reshape(40, 50, 60)
    packed = zarr.create_array(tmp_path / "z.zarr", shape=data.shape, chunks=(10, 10, 60), dtype="float32")
    packed[:] = data  # zarr-python's default: zstd
    printed = json.loads(run("plan", str(tmp_path / "z.zarr"), "--json").stdout)
    assert printed["store"]["compression"].startswith("zstd:")
    assert printed["store"]["copies"][0]["layout"] == "10x10x60/10x10x60"
    blosc = zarr.create_array(
        tmp_path / "b.zarr", shape=data.shape, chunks=(10, 10, 60), dtype="float32",
        compressors=[zarr.codecs.BloscCodec()],
    )  # fmt: skip
    blosc[:] = data
    printed = json.loads(run("plan", str(tmp_path / "b.zarr"), "--json").stdout)
    assert printed["store"]["compression"].startswith("blosc-")
    run("plan", str(tmp_path / "b.zarr"), "--compress", "blosc-lz4:5")


def test_reads_go_to_the_copy_laid_out_for_them(views_store):
    store, _ = views_store
    amplitude = cubeslab.open(store).amplitude
    views = cubeslab.open(store).attributes["cubeslab"]["views"]
    assert Path(amplitude.source_for((5,))).name == views["inline"]["array"]
    assert Path(amplitude.source_for((slice(None), 5))).name == views["crossline"]["array"]
    assert Path(amplitude.source_for((slice(None), slice(None), 5))).name == views["time"]["array"]


def test_arrays_with_copies_pickle_with_them(views_store, f3_cube):
    store, _ = views_store
    amplitude = cubeslab.open(store).amplitude
    back = pickle.loads(pickle.dumps(amplitude))
    assert back.copies == amplitude.copies and len(back.copies) == 3
    assert np.array_equal(back[:, 7], f3_cube[:, 7])


def test_a_copy_of_another_shape_is_refused(tmp_path):
    a = cubeslab.Array.from_numpy(tmp_path / "a.zarr", np.zeros((4, 5, 6), np.float32), chunks=(2, 2, 2))
    cubeslab.Array.from_numpy(tmp_path / "b.zarr", np.zeros((4, 5, 7), np.float32), chunks=(2, 2, 2))
    with pytest.raises(InvalidInputError, match="shape and dtype"):
        cubeslab.Array(a.path, copies=[tmp_path / "b.zarr"])


def test_views_of_a_prestack_survey(tmp_path):
    source = F3.parent / "small-ps.sgy"
    store = tmp_path / "ps.zarr"
    cubeslab.ingest(source, store, views=["inline", "time"])
    cube = cubeslab.open(store)
    with segyio.open(source) as f:
        expected = segyio.tools.cube(f)
    assert cube.ndim == 4
    assert np.array_equal(cube[...], expected)
    assert np.array_equal(cube[1], expected[1])
    assert np.array_equal(cube[..., 3], expected[..., 3])
    shutil.rmtree(store)
