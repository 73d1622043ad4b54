"""Compression: lossless codecs round-trip exactly; ZFP keeps its error within what was asked on every
chunk, on real (F3) and generated data; SNR targets land within 1 dB; the recorded errors are the
errors numpy measures against segyio; `verify` re-reads every chunk and compares with the source.

Oracles: numpy on the source samples as segyio reads them; zarr-python for the store format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import segyio

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy


def segyio_cube(path) -> np.ndarray:
    with segyio.open(path) as f:
        return segyio.tools.cube(f).astype(np.float64)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A generated survey big enough that the tuning sample is a small part of it."""
    path = tmp_path_factory.mktemp("gen") / "generated.sgy"
    write_segy(path, SyntheticSurvey(40, 36, 400, seed=11))
    return path


@pytest.fixture(scope="module", params=["f3", "generated"])
def source(request, segy_dir, generated):
    path = segy_dir / "f3.sgy" if request.param == "f3" else generated
    return path, segyio_cube(path)


def inner_chunks(shape, inner):
    """Slices of every inner chunk of an array."""
    grid = [range(0, n, c) for n, c in zip(shape, inner, strict=True)]
    for corner in np.ndindex(*[len(g) for g in grid]):
        yield tuple(
            slice(g[i], min(g[i] + c, n)) for g, i, c, n in zip(grid, corner, inner, shape, strict=True)
        )


def snr_db(reference: np.ndarray, decoded: np.ndarray) -> float:
    error = decoded.astype(np.float64) - reference
    return 10 * np.log10((reference**2).sum() / (error**2).sum())


# -- lossy: error bounds and targets -------------------------------------------------------------


@pytest.mark.parametrize("bound", ["0.5%", "3%"])
def test_max_error_holds_on_every_chunk(source, tmp_path, bound):
    path, reference = source
    cubeslab.ingest(path, tmp_path / "c.zarr", max_error=bound)
    cube = cubeslab.open(tmp_path / "c.zarr")
    got = cube.amplitude[...]
    limit = float(bound.rstrip("%")) / 100 * np.sqrt((reference**2).mean())
    inner = cube.amplitude.chunks
    worst = max(np.abs(got[s] - reference[s]).max() for s in inner_chunks(got.shape, inner))
    assert 0 < worst <= limit, (worst, limit)
    recorded = cube.attributes["cubeslab"]["compression"]
    assert recorded["lossy"] and recorded["codec"].startswith("zfp:tolerance=")
    assert recorded["achieved"]["max_abs_error"] == pytest.approx(np.abs(got - reference).max())


def test_tolerance_mode_bounds_the_error_of_every_chunk(source, tmp_path):
    path, reference = source
    tolerance = 0.01 * np.abs(reference).max()
    cubeslab.ingest(path, tmp_path / "c.zarr", compress=f"zfp:tolerance={tolerance}")
    cube = cubeslab.open(tmp_path / "c.zarr")
    got = cube.amplitude[...]
    for s in inner_chunks(got.shape, cube.amplitude.chunks):
        assert np.abs(got[s] - reference[s]).max() <= tolerance


@pytest.mark.parametrize("target", [25.0, 40.0])
def test_snr_target_is_met_within_one_decibel(source, tmp_path, target):
    path, reference = source
    summary = cubeslab.ingest(path, tmp_path / "c.zarr", compress=f"zfp:snr={target:g}")
    got = cubeslab.open(tmp_path / "c.zarr").amplitude[...]
    measured = snr_db(reference, got)
    assert abs(measured - target) <= 1.0, measured
    achieved = summary["compression"]["achieved"]
    # What ingest recorded is what numpy measures.
    assert achieved["snr_db"] == pytest.approx(measured, abs=1e-6)
    assert achieved["rms_error"] == pytest.approx(np.sqrt(((got - reference) ** 2).mean()), rel=1e-9)
    assert summary["compression"]["ratio"] > 2  # and it does compress


def test_fixed_rate_and_precision_modes_store_what_they_say(generated, tmp_path):
    reference = segyio_cube(generated)
    previous = None
    for rate in (2, 4, 8):
        store = tmp_path / f"r{rate}.zarr"
        summary = cubeslab.ingest(generated, store, compress=f"zfp:rate={rate}")
        # Fixed rate: the chunks take rate bits per value (plus shard indexes and checksums).
        assert summary["compression"]["ratio"] == pytest.approx(32 / rate, rel=0.1)
        snr = snr_db(reference, cubeslab.open(store).amplitude[...])
        assert previous is None or snr > previous + 5  # each doubling of the rate buys accuracy
        previous = snr
    cubeslab.ingest(generated, tmp_path / "p.zarr", compress="zfp:precision=20")
    assert snr_db(reference, cubeslab.open(tmp_path / "p.zarr").amplitude[...]) > 60


def test_bitround_keeps_the_mantissa_bits_asked_for(f3, tmp_path):
    reference = segyio_cube(f3)
    cubeslab.ingest(f3, tmp_path / "b.zarr", compress="bitround:8")
    got = cubeslab.open(tmp_path / "b.zarr").amplitude[...]
    # 8 of float32's 23 mantissa bits kept: relative error at most 2^-9.
    nonzero = reference != 0
    assert (np.abs(got - reference)[nonzero] / np.abs(reference[nonzero])).max() <= 2.0**-9
    assert not np.array_equal(got, reference)


@pytest.fixture(scope="module")
def f3(segy_dir):
    return segy_dir / "f3.sgy"


def test_zfp_cells_without_traces_read_zero_and_masked(segy_dir, tmp_path):
    # ZFP has no NaN: a missing trace is stored as 0 (read back within the codec's error), and the
    # trace mask says it is missing.
    summary = cubeslab.ingest(segy_dir / "small_hole.sgy", tmp_path / "h.zarr", compress="zfp:rate=16")
    cube = cubeslab.open(tmp_path / "h.zarr")
    data = cube.amplitude[...]
    assert (~cube.trace_mask).sum() == 1 and np.isfinite(data).all()
    assert np.abs(data[~cube.trace_mask]).max() <= summary["compression"]["achieved"]["max_abs_error"]


# -- lossless: bit-exact round trips ---------------------------------------------------------------


@pytest.mark.parametrize(
    "compress",
    ["zstd:19", "gzip:9", "blosc-lz4:1,shuffle=none", "blosc-zstd:5,shuffle=bit", "zfp:reversible"],
)
def test_lossless_codecs_reproduce_the_source_exactly(f3, tmp_path, compress):
    summary = cubeslab.ingest(f3, tmp_path / "c.zarr", compress=compress)
    assert not summary["compression"]["lossy"] and "achieved" not in summary["compression"]
    assert np.array_equal(cubeslab.open(tmp_path / "c.zarr").amplitude[...], segyio_cube(f3))
    report = cubeslab.verify(tmp_path / "c.zarr", against=f3)
    assert report["ok"] and report["against"]["max_abs_error"] == 0


def test_zarr_python_reads_bitround_stores_as_cubeslab_does(tmp_path):
    import zarr

    data = np.random.default_rng(5).standard_normal((20, 30, 40)).astype(np.float32)
    array = cubeslab.Array.from_numpy(tmp_path / "a.zarr", data, chunks=(8, 8, 8), shards=(16, 16, 16),
                                      compress="bitround:10")  # fmt: skip
    with pytest.warns(UserWarning):  # zarr-python: numcodecs codecs are not in the v3 spec
        theirs = zarr.open_array(tmp_path / "a.zarr", mode="r")[...]
    assert np.array_equal(theirs, array[...])
    assert 0 < np.abs(theirs - data).max() <= 2.0**-11 * np.abs(data).max()


# -- names and errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("compress", "says"),
    [
        ("lzma", "unknown compression"),
        ("zstd:fast", "level must be an integer"),
        ("zfp", "zfp needs a mode"),
        ("zfp:rate=4,speed=2", "unknown option"),
    ],
)
def test_bad_compression_names_are_refused_before_anything_is_written(f3, tmp_path, compress, says):
    with pytest.raises(cubeslab.InvalidInputError, match=says):
        cubeslab.ingest(f3, tmp_path / "c.zarr", compress=compress)
    assert not (tmp_path / "c.zarr").exists()


def test_zfp_refuses_types_it_cannot_hold(f3, tmp_path):
    with pytest.raises(cubeslab.InvalidInputError, match="zfp compresses"):
        cubeslab.ingest(f3, tmp_path / "c.zarr", compress="zfp:rate=4", dtype="int16")
    with pytest.raises(cubeslab.InvalidInputError, match="error target"):
        cubeslab.Array.create(tmp_path / "a.zarr", (4, 4), "float32", chunks=(2, 2), compress="zfp:snr=30")


def cli(*args):
    entry = Path(sys.executable).with_name("cubeslab")  # the installed entry point, as users run it
    return subprocess.run([str(entry), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_cli_max_error_info_and_verify(f3, tmp_path):
    store = tmp_path / "c.zarr"
    done = cli("ingest", f3, store, "--max-error", "1%")
    assert done.returncode == 0, done.stderr
    info = json.loads(cli("info", store, "--json").stdout)
    assert (
        info["compression"].startswith("zfp:tolerance=")
        and "tuned for zfp:max-error=1%" in info["compression"]
    )
    assert "SNR" in info["error"] and "max |error|" in info["error"]
    checked = cli("verify", store, "--against", f3)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SNR" in checked.stdout and "ok" in checked.stdout
    both = cli("ingest", f3, tmp_path / "d.zarr", "--max-error", "1%", "--compress", "zstd")
    assert both.returncode != 0 and "--max-error" in both.stderr


def test_nan_and_infinity_are_refused_under_zfp_not_stored_as_other_numbers(tmp_path):
    """ZFP codes blocks of numbers: a NaN came back as 3.99 and its neighbours' error as inf, with verify
    saying ok. An ingest is refused, naming the shard, and leaves nothing; a window write is refused
    once, and the store keeps what it held."""
    values = np.ones((16, 16, 16), "f4")
    values[0, 0, 0] = np.nan
    np.save(tmp_path / "nan.npy", values)
    refused = cli("ingest", tmp_path / "nan.npy", tmp_path / "n.zarr", "--compress", "zfp:tolerance=0.01")
    assert refused.returncode == 1
    said = " ".join(refused.stderr.split())
    assert "c/0/0/0: unsupported: NaN or infinite values under lossy compression" in said, said
    assert "writing the cached changes" not in said, said  # said once
    assert not (tmp_path / "n.zarr").exists()
    np.save(tmp_path / "ones.npy", np.ones((16, 16, 16), "f4"))
    assert (
        cli(
            "ingest", tmp_path / "ones.npy", tmp_path / "z.zarr", "--compress", "zfp:tolerance=0.01"
        ).returncode
        == 0
    )
    with cubeslab.open(tmp_path / "z.zarr", "r+") as cube:
        shard = tuple(slice(0, n) for n in cube.amplitude.shards)  # a lossy store takes whole shards
        infinite = np.full([n.stop for n in shard], 2.0, "f4")
        infinite[3, 3, 3] = np.inf
        cube[shard] = infinite
        with pytest.raises(cubeslab.InvalidInputError, match="NaN or infinite"):
            cube.flush()
    np.testing.assert_allclose(cubeslab.open(tmp_path / "z.zarr")[...], 1.0, atol=0.01)
    # The source changed to hold a NaN where the store has a number: verify compares, and fails.
    np.save(tmp_path / "ones.npy", values)
    compared = cli("verify", tmp_path / "z.zarr", "--against", tmp_path / "ones.npy")
    assert compared.returncode == 1, compared.stdout
    assert "NaN or infinity" in " ".join(compared.stdout.split())
