"""Shared fixtures: the real-world test data in tests/data (provenance in its README), an ingest
helper, independent SEG-Y oracles (segyio, or a numpy decode of the raw bytes where segyio cannot
read a format), and a tiny SEG-Y writer for broken fixtures (a small synthetic survey whose bytes
the tests then corrupt).

Nothing under tests/data is ever written: tests that write or corrupt work on copies in tmp_path.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy

# Plans made in tests use the built-in typical machine, never a profile the
# developer measured; tests that measure one write it here.
_PROFILES = tempfile.TemporaryDirectory(prefix="cubeslab-profiles-")  # removed when the session ends
os.environ["CUBESLAB_PROFILE_DIR"] = _PROFILES.name
os.environ.pop("CUBESLAB_PROFILE", None)
os.environ["CUBESLAB_AUTO_PROFILE"] = "0"

REPO = Path(__file__).resolve().parents[1]
# The benchmark studies live outside the package (bench/cubeslab_bench): commands the tests run
# (`cubeslab bench`) find them as `make bench` does.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(REPO / "bench"), os.environ.get("PYTHONPATH")) if p
)
DATA_DIR = REPO / "tests" / "data"
SEGY_DIR = DATA_DIR / "segy"
MDIO_F3 = DATA_DIR / "mdio" / "f3.mdio"

# Files that hold no inline/crossline geometry: cubeslab must refuse them with a clear error.
UNSTRUCTURED = ("shot-gather.sgy", "small.su")
# Files that segyio cannot open with geometry (holes, non-rectangular layout): compared trace by trace.
IRREGULAR = ("small_hole.sgy", "small-irregular.sgy")
# Sample formats segyio does not decode (it falls back to IBM float and returns garbage): 24-bit integers.
RAW_DECODED_FORMATS = {7: True, 15: False}  # format code -> signed

TRACE_HEADER_BYTES = 240
FILE_HEADER_BYTES = 3600
BYTES_PER_SAMPLE = {1: 4, 2: 4, 3: 2, 4: 4, 5: 4, 6: 8, 7: 3, 8: 1, 9: 8, 10: 4, 11: 2, 12: 8, 15: 3, 16: 1}


@dataclass(frozen=True)
class SegyCase:
    """One SEG-Y file of the test data and what a reader must be told to read it."""

    path: Path
    endian: str  # "big" or "little": the files say so in their names (…lsb = little endian)

    @property
    def name(self) -> str:
        return str(self.path.relative_to(SEGY_DIR))

    @property
    def regular(self) -> bool:
        """segyio opens it with geometry."""
        return self.path.name not in IRREGULAR

    @property
    def format_code(self) -> int:
        return binary_field(self.path.read_bytes(), 3225, 2, self.endian)

    def __str__(self) -> str:
        return self.name


def _segy_cases() -> list[SegyCase]:
    paths = sorted(SEGY_DIR.glob("*.sgy")) + sorted((SEGY_DIR / "multiformats").glob("*.sgy"))
    return [
        SegyCase(p, "little" if ("lsb" in p.name) else "big") for p in paths if p.name not in UNSTRUCTURED
    ]


SEGY_CASES = _segy_cases()


def pytest_generate_tests(metafunc):
    """``segy_case`` parametrizes a test over every structured SEG-Y file (ids name the file)."""
    if "segy_case" in metafunc.fixturenames:
        metafunc.parametrize("segy_case", SEGY_CASES, ids=[c.name for c in SEGY_CASES])


# -- raw byte helpers ------------------------------------------------------------------------------


def binary_field(data: bytes, byte: int, size: int, endian: str = "big", signed: bool = True) -> int:
    """Integer field at 1-based file position ``byte``."""
    return int.from_bytes(data[byte - 1 : byte - 1 + size], endian, signed=signed)


def put_field(data: bytearray, byte: int, value: int, size: int, endian: str = "big") -> None:
    """Write an integer at 1-based file position ``byte`` (two's complement when negative)."""
    data[byte - 1 : byte - 1 + size] = int(value).to_bytes(size, endian, signed=value < 0)


# -- oracles ---------------------------------------------------------------------------------------


def decode_24bit(path: Path, endian: str, signed: bool) -> np.ndarray:
    """Every trace's samples of a 3-byte-integer file (formats 7 and 15), decoded with numpy alone.

    Traces start at byte 3600 (no extended headers in these files); each is a 240-byte header then
    ``ns`` samples of 3 bytes; ``ns`` is the binary header's count (byte 3221)."""
    raw = path.read_bytes()
    ns = binary_field(raw, 3221, 2, endian, signed=False)
    trace_len = TRACE_HEADER_BYTES + 3 * ns
    n = (len(raw) - FILE_HEADER_BYTES) // trace_len
    traces = np.frombuffer(raw, np.uint8, count=n * trace_len, offset=FILE_HEADER_BYTES).reshape(n, trace_len)
    b = traces[:, TRACE_HEADER_BYTES:].reshape(n, ns, 3).astype(np.int64)
    hi, mid, lo = (b[..., 0], b[..., 1], b[..., 2]) if endian == "big" else (b[..., 2], b[..., 1], b[..., 0])
    values = (hi << 16) | (mid << 8) | lo
    if signed:
        values = np.where(values >= 1 << 23, values - (1 << 24), values)
    return values


@dataclass
class SegyOracle:
    """What an independent reader says a SEG-Y file holds, laid out on the (inline, crossline
    [, offset], sample) grid; cells without a trace are NaN (float) and False in ``mask``."""

    ilines: np.ndarray
    xlines: np.ndarray
    offsets: np.ndarray | None
    samples: np.ndarray
    cube: np.ndarray  # native values (float64 where cells are missing)
    mask: np.ndarray
    cells: list[tuple[int, ...]]  # grid position of each trace, in file order
    traces: np.ndarray  # samples of each trace, in file order
    headers: dict[str, np.ndarray] = field(default_factory=dict)  # TraceField name -> value per trace
    dtype: np.dtype | None = None  # the numpy type that holds the format (segyio's, or 24-bit -> 32-bit)


def segy_oracle(case: SegyCase) -> SegyOracle:
    """Read ``case`` with segyio (trace by trace, ignoring geometry) or, for 24-bit formats, with
    :func:`decode_24bit`; place the traces by their INLINE_3D / CROSSLINE_3D (/ offset) headers."""
    import segyio

    from cubeslab.trace_fields import TRACE_FIELDS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # segyio warns about formats it does not know
        with segyio.open(case.path, endian=case.endian, ignore_geometry=True) as f:
            headers = {name: f.attributes(getattr(segyio.TraceField, name))[:] for name in TRACE_FIELDS}
            samples = np.asarray(f.samples, dtype=np.float64)
            code = case.format_code
            if code in RAW_DECODED_FORMATS:
                traces = decode_24bit(case.path, case.endian, RAW_DECODED_FORMATS[code])
                dtype = np.dtype("int32" if RAW_DECODED_FORMATS[code] else "uint32")
            else:
                traces = f.trace.raw[:]
                dtype = np.dtype(f.dtype)
                if code == 4:  # segyio falls back to 4-byte floats for the obsolete fixed-point format
                    dtype = np.dtype("float32")
    il, xl, off = headers["INLINE_3D"], headers["CROSSLINE_3D"], headers["offset"]
    ilines, xlines, offsets = np.unique(il), np.unique(xl), np.unique(off)
    prestack = len(set(zip(il.tolist(), xl.tolist(), strict=True))) < len(il)
    if not prestack:
        offsets = None
    grid = (len(ilines), len(xlines)) + ((len(offsets),) if prestack else ())
    cells = []
    for i in range(len(il)):
        cell = (int(np.searchsorted(ilines, il[i])), int(np.searchsorted(xlines, xl[i])))
        if prestack:
            cell += (int(np.searchsorted(offsets, off[i])),)
        cells.append(cell)
    mask = np.zeros(grid, dtype=bool)
    for cell in cells:
        mask[cell] = True
    cube_dtype = traces.dtype if mask.all() else np.dtype(np.float64)
    cube = np.full((*grid, traces.shape[1]), np.nan if cube_dtype.kind == "f" else 0, dtype=cube_dtype)
    for cell, trace in zip(cells, traces, strict=True):
        cube[cell] = trace
    return SegyOracle(ilines, xlines, offsets, samples, cube, mask, cells, traces, headers, dtype)


@pytest.fixture(scope="session")
def oracle_of():
    """``oracle_of(case)``: the (cached) :class:`SegyOracle` of a test-data SEG-Y file."""
    cache: dict[Path, SegyOracle] = {}

    def get(case: SegyCase) -> SegyOracle:
        if case.path not in cache:
            cache[case.path] = segy_oracle(case)
        return cache[case.path]

    return get


# -- ingest helpers --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA_DIR


@pytest.fixture(scope="session")
def segy_dir() -> Path:
    return SEGY_DIR


@pytest.fixture(scope="session")
def mdio_f3() -> Path:
    return MDIO_F3


@pytest.fixture
def ingest_cube(tmp_path):
    """``ingest_cube(src, **options) -> Cube``: ingest ``src`` into a fresh store under tmp_path and
    open it. The store's path is ``cube.path``; the ingest summary is ``cube.summary``."""
    counter = itertools.count()

    def run(src, store=None, **options):
        store = Path(store) if store else tmp_path / f"{Path(src).stem}-{next(counter)}.zarr"
        summary = cubeslab.ingest(src, store, **options)
        cube = cubeslab.open(store)
        cube.summary = summary
        return cube

    return run


@pytest.fixture(scope="session")
def ingested(tmp_path_factory):
    """``ingested(case, dtype=None) -> Path``: a store of a test-data file, ingested once per session
    (read-only use: tests that write must ingest their own)."""
    root = tmp_path_factory.mktemp("stores")
    cache: dict[tuple, Path] = {}

    def get(case: SegyCase, dtype: str | None = None) -> Path:
        key = (case.path, dtype)
        if key not in cache:
            store = root / f"{case.name.replace('/', '_')}-{dtype or 'float32'}.zarr"
            cubeslab.ingest(case.path, store, dtype=dtype)
            cache[key] = store
        return cache[key]

    return get


def assert_no_complete_store(store: Path) -> None:
    """After a failed ingest nothing at ``store`` may look like a finished store."""
    with pytest.raises((cubeslab.StoreNotFoundError, cubeslab.IncompleteStoreError)):
        cubeslab.open(store)


@pytest.fixture
def no_complete_store():
    return assert_no_complete_store


# -- a tiny SEG-Y writer for broken fixtures -------------------------------------------------------


@dataclass
class SyntheticSegy:
    """A small synthetic SEG-Y file (big endian, IEEE float, inline-sorted, no extended headers) and
    the means to corrupt copies of it. Byte positions are 1-based as in the SEG-Y standard."""

    path: Path
    survey: SyntheticSurvey

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.survey.shape

    @property
    def n_traces(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def trace_len(self) -> int:
        return TRACE_HEADER_BYTES + 4 * self.shape[2]

    def volume(self) -> np.ndarray:
        """The amplitudes as written (IEEE float32 stores them exactly)."""
        return self.survey.volume()

    def trace_offset(self, i: int) -> int:
        """0-based file offset of trace ``i`` (0-based)."""
        return FILE_HEADER_BYTES + i * self.trace_len

    def variant(self, name: str, mutate=None, data: bytes | None = None) -> Path:
        """A copy under a new name, changed by ``mutate(bytearray)`` or replaced by ``data``."""
        raw = bytearray(self.path.read_bytes() if data is None else data)
        if mutate is not None:
            mutate(raw)
        out = self.path.with_name(name)
        out.write_bytes(bytes(raw))
        return out

    def patch(self, name: str, byte: int, value: int, size: int) -> Path:
        """A copy with one file-header field changed."""
        return self.variant(name, lambda raw: put_field(raw, byte, value, size))

    def set_trace_field(self, raw: bytearray, trace: int, byte: int, value: int, size: int) -> None:
        """Set a trace header field (``byte`` 1-based inside the 240-byte header) of trace ``trace``."""
        put_field(raw, self.trace_offset(trace) + byte, value, size)

    def patch_traces(self, name: str, byte: int, values, size: int = 4) -> Path:
        """A copy whose trace header field at ``byte`` holds ``values[i]`` in trace i (or one value)."""
        values = np.broadcast_to(np.asarray(values), (self.n_traces,))

        def mutate(raw):
            for i, v in enumerate(values):
                self.set_trace_field(raw, i, byte, int(v), size)

        return self.variant(name, mutate)

    def reorder(self, name: str, order) -> Path:
        """A copy with the traces in ``order`` (a permutation of trace indices)."""
        raw = self.path.read_bytes()
        body = [raw[self.trace_offset(i) : self.trace_offset(i) + self.trace_len] for i in order]
        return self.variant(name, data=raw[:FILE_HEADER_BYTES] + b"".join(body))


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    """A real S3-compatible server process for the test module; its endpoint and credentials are in
    the ``AWS_*`` environment meanwhile."""
    from cubeslab_bench.s3_server import S3Server, free_port

    running = S3Server(tmp_path_factory.mktemp("s3"), free_port()).start()
    saved = {k: os.environ.get(k) for k in running.env()}
    os.environ.update(running.env())
    yield running
    running.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def synthetic_segy(tmp_path):
    """``synthetic_segy(n_il=6, n_xl=5, ns=20, name=...) -> SyntheticSegy`` written under tmp_path."""

    def make(n_il: int = 6, n_xl: int = 5, ns: int = 20, name: str | None = None) -> SyntheticSegy:
        path = tmp_path / (name or f"synthetic-{n_il}x{n_xl}x{ns}.sgy")
        survey = SyntheticSurvey(n_il, n_xl, ns)
        write_segy(path, survey, sample_format=5)
        return SyntheticSegy(path, survey)

    return make


@pytest.fixture(scope="session")
def tiny_bench(tmp_path_factory) -> Path:
    """Every benchmark study run once at its tiny size into one report folder (about two minutes);
    the study tests read what it recorded, and the report test renders it."""
    import cubeslab_bench

    root = tmp_path_factory.mktemp("bench")
    for study in cubeslab_bench.STUDIES:
        cubeslab_bench.run(study, size="tiny", out=root / "out", data=root / "data")
    return root / "out"


def timings(value, where: str = "results"):
    """Every timing (a dict with a median) under a study's recorded results, with where it was found."""
    if isinstance(value, dict):
        if "median_s" in value:
            yield where, value
        for key, item in value.items():
            yield from timings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from timings(item, f"{where}[{i}]")


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB filesystem of its own, so that a write can run out of space."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a small tmpfs needs root (CI runs as root): {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def netcdf_file(path: Path, fmt: str) -> None:
    """A small CF grid written by netCDF4 in ``fmt``: temp (int16, packed, a fill value) over time, lat
    and lon, with coordinate variables and a global title."""
    import netCDF4

    with netCDF4.Dataset(path, "w", format=fmt) as d:
        d.title = "a test grid"
        d.createDimension("time", 4)
        d.createDimension("lat", 5)
        d.createDimension("lon", 6)
        t = d.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = np.arange(4)
        lat = d.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat[:] = np.linspace(-10, 10, 5)
        d.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 50, 6)
        v = d.createVariable("temp", "i2", ("time", "lat", "lon"), fill_value=-999)
        v.scale_factor, v.add_offset, v.units, v.long_name = 0.01, 273.15, "K", "temperature"
        v.set_auto_maskandscale(False)
        raw = (np.arange(120).reshape(4, 5, 6) * 3).astype("i2")
        raw[0, 0, 0] = -999
        v[:] = raw


def netcdf_named_like_dimensions(path: Path) -> None:
    """A NetCDF 4 file written by netCDF4 with variables named like dimensions they do not label, which
    netCDF-C stores as ``_nc4_non_coord_<name>`` beside the dimension's scale: x(y, x) at the root, and
    z(x, z) in group grp beside v(t, z); t, of the root, has its coordinate variable."""
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as d:
        d.createDimension("t", 2)
        d.createDimension("y", 4)
        d.createDimension("x", 5)
        d.createVariable("t", "f8", ("t",))[:] = [10.0, 20.0]
        d.createVariable("x", "f4", ("y", "x"))[:] = np.arange(20, dtype="f4").reshape(4, 5) + 100
        group = d.createGroup("grp")
        group.createDimension("z", 3)
        group.createVariable("z", "i2", ("x", "z"))[:] = np.arange(15, dtype="i2").reshape(5, 3) - 7
        group.createVariable("v", "f8", ("t", "z"))[:] = np.arange(6).reshape(2, 3) / 4


T = TypeVar("T")


def wait_for(condition: Callable[[], bool], process: subprocess.Popen, what: str) -> None:
    """Poll ``condition`` every 2 ms until it holds; fail if ``process`` ends first."""
    deadline = time.monotonic() + 120
    while not condition():
        assert process.poll() is None, f"the run ended before {what}: {process.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within 120 s"
        time.sleep(0.002)


def run_while_paused(running: subprocess.Popen, run: Callable[[], T]) -> T:
    """``run()`` while ``running`` is stopped (SIGSTOP: alive, holding its locks); then ``running``
    continues, and must succeed."""
    os.kill(running.pid, signal.SIGSTOP)
    try:
        result = run()
    finally:
        os.kill(running.pid, signal.SIGCONT)
    _, stderr = running.communicate(timeout=300)
    assert running.returncode == 0, stderr
    return result
