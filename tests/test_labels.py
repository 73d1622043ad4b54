"""Planes by label and by position, against segyio: ``cube.inline[a:b:step]``, lists of labels,
``cube.time_slice[t0:t1]`` (ms) and ``cube.depth_slice[k]`` (a sample *index*, as in segyio)."""

from __future__ import annotations

import numpy as np
import pytest
import segyio

import cubeslab

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # f3's headers disagree on its trace length

LINE_SLICES = [
    slice(111, 115),
    slice(111, 120, 2),
    slice(110, 120, 3),  # starts before the first line: range(110, 120, 3) -> 113, 116, 119
    slice(None, 115),
    slice(125, None),
    slice(None, None),
    slice(None, None, 3),
    slice(115, 111, -1),
    slice(None, None, -1),
    slice(130, None, -4),
    slice(None, 120, -2),
    slice(120, 10_000),
    slice(200, None),  # nothing: an empty stack
    slice(111, 112, -1),
    # segyio slices a list 0..last by these labels: negative bounds count back from last + 1 ...
    slice(-5, None),
    slice(-20, -10, 3),
    slice(None, -15),
    # ... and a start past the last label steps back from the last one
    slice(140, 120, -3),
    slice(140, None, -4),
]
DEPTH_KEYS = [
    slice(3, 10),
    slice(None, None, -7),
    slice(-5, None),
    slice(70, 200),
    slice(None, 12, 4),
    slice(40, 3, -9),
    slice(10, 10),
]


def stacked(planes, plane_shape) -> np.ndarray:
    """What segyio yields, stacked. segyio's generators reuse two buffers, so each plane is copied
    as it comes (``np.stack(list(gen))`` would repeat the last two planes)."""
    planes = [np.copy(p) for p in planes]
    return np.stack(planes).astype(np.float32) if planes else np.empty((0, *plane_shape), np.float32)


@pytest.fixture
def f3(segy_dir, ingest_cube):
    path = segy_dir / "f3.sgy"
    with segyio.open(path) as f:
        yield ingest_cube(path), f


def count_reads(monkeypatch, cube) -> list:
    calls: list = []
    read = cube.amplitude.read

    def counted(*args, **kwargs):
        calls.append(args)
        return read(*args, **kwargs)

    monkeypatch.setattr(cube.amplitude, "read", counted)
    return calls


def test_has_the_labels_these_tests_assume(f3):
    cube, f = f3
    assert list(f.ilines) == list(range(111, 134)) == list(cube.coords["inline"])
    assert list(f.xlines) == list(range(875, 893)) == list(cube.coords["crossline"])
    assert np.array_equal(f.samples, np.arange(4, 304, 4)) and np.array_equal(cube.coords["time"], f.samples)


@pytest.mark.parametrize("key", LINE_SLICES, ids=str)
def test_inline_slices_stack_what_segyio_yields(f3, key, monkeypatch):
    cube, f = f3
    calls = count_reads(monkeypatch, cube)
    got = cube.inline[key]
    assert len(calls) == min(1, got.shape[0])  # f3's inlines are evenly spaced: one window (none if empty)
    expected = stacked(f.iline[key], f.iline[111].shape)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("key", LINE_SLICES, ids=str)
def test_crossline_slices_stack_what_segyio_yields(f3, key):
    cube, f = f3
    shift = 875 - 111  # the same slices, moved onto f3's crossline numbers
    moved = slice(
        None if key.start is None else key.start + shift,
        None if key.stop is None else key.stop + shift,
        key.step,
    )
    expected = stacked(f.xline[moved], f.xline[875].shape)
    assert np.array_equal(cube.crossline[moved], expected)


@pytest.mark.parametrize("key", DEPTH_KEYS, ids=str)
def test_depth_slice_takes_sample_positions_as_segyio_does(f3, key):
    cube, f = f3
    assert np.array_equal(cube.depth_slice[key], stacked(f.depth_slice[key], f.depth_slice[0].shape))


def test_depth_slice_of_one_index_is_segyios_plane(f3):
    cube, f = f3
    assert len(cube.depth_slice) == len(f.depth_slice) == 75
    for k in (0, 8, 40, 74, -1, -75, np.int64(8)):
        plane = cube.depth_slice[k]
        assert plane.shape == f.depth_slice[k].shape == (23, 18)
        assert np.array_equal(plane, f.depth_slice[k].astype(np.float32)), k
    # the index, not the time: sample 8 is at 36 ms
    assert np.array_equal(cube.depth_slice[8], cube.time_slice[36.0])
    assert np.array_equal(cube.depth_slice[[8, 2, 8]], stacked((f.depth_slice[k] for k in (8, 2, 8)), ()))


def test_depth_slice_refuses_what_is_not_a_position(f3):
    cube, _ = f3
    for key in (8.0, np.float64(36.0), "8", True, (1, 2)):
        with pytest.raises(cubeslab.SelectionError):
            cube.depth_slice[key]
    with pytest.raises(cubeslab.SelectionError, match="time_slice"):
        cube.depth_slice[1200.0]
    for key in (75, -76, [3, 75]):
        with pytest.raises(cubeslab.SelectionError, match="out of range") as error:
            cube.depth_slice[key]
        assert isinstance(error.value, IndexError)  # as segyio raises


def test_time_slices_select_t0_to_t1_in_ms(f3, monkeypatch):
    cube, f = f3

    def samples(*ks):
        return stacked((f.depth_slice[k] for k in ks), f.depth_slice[0].shape)

    # times are 4, 8, ..., 300 ms: sample k is at 4 (k + 1) ms
    assert np.array_equal(cube.time_slice[8.0:40.0], samples(*range(1, 9)))  # t1 exclusive
    assert np.array_equal(cube.time_slice[8:40:8], samples(1, 3, 5, 7))
    assert np.array_equal(cube.time_slice[5:40:8], samples(1, 3, 5, 7))  # the step counts from 8 ms
    assert np.array_equal(cube.time_slice[40:8:-12], samples(9, 6, 3))
    assert np.array_equal(cube.time_slice[290.0:], samples(72, 73, 74))
    assert np.array_equal(cube.time_slice[:12], samples(0, 1))
    assert np.array_equal(cube.time_slice[::-4], samples(*range(74, -1, -1)))
    assert cube.time_slice[400:500].shape == (0, 23, 18)
    assert np.array_equal(cube.time_slice[[300.0, 4.0, 36.0]], samples(74, 0, 8))
    calls = count_reads(monkeypatch, cube)
    cube.time_slice[100.0:200.0:8.0]
    assert len(calls) == 1
    for step in (6, -1, 2.0, 0.001):  # the step is in ms
        with pytest.raises(cubeslab.SelectionError, match="multiple of the sample interval 4"):
            cube.time_slice[8:40:step]
    with pytest.raises(cubeslab.SelectionError, match="zero"):
        cube.time_slice[8:40:0]


def test_lists_of_labels_stack_those_planes(f3, monkeypatch):
    cube, f = f3
    for labels in ([115, 111, 131], [111, 113, 115], np.array([120, 121]), [111], [112, 112]):
        expected = stacked((f.iline[il] for il in labels), ())
        assert np.array_equal(cube.inline[labels], expected), labels
    assert np.array_equal(cube.crossline[[892, 875]], stacked((f.xline[x] for x in (892, 875)), ()))
    calls = count_reads(monkeypatch, cube)
    cube.inline[[131, 127, 123]]  # evenly spaced, backwards: one window
    assert len(calls) == 1
    assert cube.inline[[]].shape == (0, 18, 75)


def test_unknown_labels_raise_a_label_error_naming_axis_label_and_range(f3):
    cube, _ = f3
    cases = [
        (lambda: cube.inline[99], "inline 99 .*111..133"),
        (lambda: cube.inline[[111, 140]], "inline 140 .*111..133"),
        (lambda: cube.crossline[874], "crossline 874 .*875..892"),
        (lambda: cube.time_slice[5.0], "time 5.0 .*4.0..300.0 .*step 4.0"),
        (lambda: cube.time_slice[[4.0, 302.0]], "time 302.0 .*4.0..300.0"),
        (lambda: cube.trace(111, 900), "crossline 900 .*875..892"),
        (lambda: cube.axis("offset"), "no axis 'offset'; the axes are inline, crossline, time"),
    ]
    for read, message in cases:
        with pytest.raises(cubeslab.LabelError, match=message):
            read()


def test_bad_slices_and_tuples_are_refused(f3):
    cube, _ = f3
    with pytest.raises(cubeslab.SelectionError, match="integers"):
        cube.inline[111.5:115]
    with pytest.raises(cubeslab.SelectionError, match="zero"):
        cube.inline[111:115:0]
    # segyio reads f.iline[il, offset]: a tuple must not silently mean two inlines here
    with pytest.raises(cubeslab.SelectionError, match="offset"):
        cube.inline[111, 112]


def test_trace_takes_inline_and_crossline_numbers(f3):
    cube, f = f3
    assert np.array_equal(cube.trace(111, 880), f.trace[5].astype(np.float32))
    assert np.array_equal(cube.trace(133, 892), f.trace[f.tracecount - 1].astype(np.float32))
    assert np.array_equal(cube.trace(111, 880), f.gather[111, 880].astype(np.float32).reshape(-1))
    with pytest.raises(cubeslab.SelectionError):
        cube.trace(111, 880, 4.0)
    with pytest.raises(cubeslab.SelectionError):
        cube.trace(111, [880])
    with pytest.raises(TypeError):
        cube.trace[5]  # segyio's trace index has no counterpart: it fails rather than reading a plane


def test_unevenly_spaced_labels_follow_segyios_range_rule(synthetic_segy, ingest_cube):
    """Inlines 10, 12, 14, 20, 22, 30: a slice keeps the labels of range(start, stop, step) that exist,
    read plane by plane when their positions are not evenly spaced."""
    segy = synthetic_segy(6, 5, 20)
    numbers = np.array([10, 12, 14, 20, 22, 30])
    path = segy.patch_traces("uneven.sgy", 189, np.repeat(numbers, 5))
    cube = ingest_cube(path)
    assert list(cube.coords["inline"]) == list(numbers)
    with segyio.open(path) as f:
        for key in (
            slice(10, 31, 4),
            slice(None, None, 2),
            slice(30, 9, -8),
            slice(11, 23),
            slice(None, None),
        ):
            expected = stacked(f.iline[key], f.iline[10].shape)
            assert np.array_equal(cube.inline[key], expected), key
        assert np.array_equal(cube.inline[[30, 10, 14]], stacked((f.iline[i] for i in (30, 10, 14)), ()))


def test_labels_from_zero_slice_as_positions_do(tmp_path):
    """Labels 0..n-1 (a plain array): a label slice is numpy's slice, even where segyio's omitted stop
    (first label - 1 = -1) would wrap to the end and yield nothing."""
    data = np.arange(7 * 6 * 5, dtype=np.float32).reshape(7, 6, 5)
    cubeslab.Array.from_numpy(tmp_path / "plain.zarr", data, chunks=(3, 3, 5))
    cube = cubeslab.open(tmp_path / "plain.zarr")
    axis = cube.axis(cube.dims[0])
    assert list(axis.labels) == list(range(7))
    for key in (slice(None, None, -1), slice(2, 5), slice(-3, None), slice(None, None, -2), slice(5, 0, -2)):
        assert np.array_equal(axis[key], data[key]), key
        assert np.array_equal(cube.axis(cube.dims[1])[key], np.moveaxis(data[:, key], 1, 0)), key
