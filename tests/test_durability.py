"""``ingest --durable`` (power-loss durability): every file and folder of the store is flushed to the device
before the store is marked complete, and the marker after. Watched from outside, as the kernel sees
it: the real CLI runs under ``strace``, which logs each fsync with the path of its descriptor."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cubeslab

SEGY = Path(__file__).resolve().parent / "data/segy/f3.sgy"
CLI = Path(sys.executable).parent / "cubeslab"
F3_SHAPE = (23, 18, 75)

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="make test installs strace")

# strace -y prints a descriptor as 3</path/of/the/file>.
FSYNC = re.compile(r"\bf(?:data)?sync\(\d+<(?P<path>[^>]*)>\) = 0")


def fsynced_paths(tmp_path: Path, store: Path, *flags: str) -> list[Path]:
    """The paths fsync'd by an ingest into `store`, in the order the kernel saw them."""
    log = tmp_path / f"strace-{store.name}.log"
    command = [str(CLI), "ingest", str(SEGY), str(store), "--layout", "4x4x25/8x8x75", "--views", "time"]
    subprocess.run(
        ["strace", "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", "-o", str(log), *command, *flags],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # The store is written under its staging name, then renamed into place: a path of the
    # staging folder is the store's path to be.
    staging = store.with_name(f".{store.name}.cubeslab-new")
    paths = [Path(m["path"]) for m in FSYNC.finditer(log.read_text())]
    paths = [store / p.relative_to(staging) if staging == p or staging in p.parents else p for p in paths]
    return [p for p in paths if p in (store, store.parent) or store in p.parents]


def test_a_durable_ingest_flushes_every_file_and_folder_before_the_completion_marker(tmp_path):
    store = tmp_path / "durable.zarr"
    synced = fsynced_paths(tmp_path, store, "--durable")

    on_disk = {store, *store.rglob("*")}
    assert synced[-1] == store.parent, "the rename into place is flushed last"
    synced = synced[:-1]
    assert len(on_disk) > 20, "shards of the amplitude array, its view, headers and coordinates"
    assert on_disk - set(synced) == set(), "every file and folder of the store is flushed"

    # The marker: the root zarr.json is written to a temporary file, flushed, renamed into place,
    # and the store folder flushed after the rename. Everything else was flushed before it.
    marker = next(i for i, p in enumerate(synced) if p.parent == store and p.name.startswith("zarr.json."))
    assert on_disk - {store} <= set(synced[:marker])
    assert synced[marker + 1 :] == [store]
    assert cubeslab.open(store).amplitude.shape == F3_SHAPE


def test_without_durable_nothing_is_flushed(tmp_path):
    store = tmp_path / "plain.zarr"
    assert fsynced_paths(tmp_path, store) == []
    assert cubeslab.open(store).amplitude.shape == F3_SHAPE
