"""What a benchmark ran on: CPU, memory, the disk under the data, software versions."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

DISTRIBUTIONS = (
    "cubeslab", "numpy", "segyio", "h5py", "zarr", "tensorstore", "multidimio", "openvds",
    "seismic-zfp", "netCDF4", "astropy", "dask", "distributed", "matplotlib",
)  # fmt: skip
"""Python distributions whose versions a report lists (those installed)."""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mount_of(path: Path) -> tuple[str, str, str]:
    """(device, mount point, filesystem type) of the filesystem holding ``path``."""
    best = ("?", "/", "?")
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return best
    target = str(path.resolve())
    for line in lines:
        device, mount, fstype = line.split()[:3]
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[1]):
            best = (device, mount, fstype)
    return best


def _block_device(device: str) -> dict:
    """Model and kind of the block device behind ``/dev/NAME`` (partitions resolve to their disk)."""
    name = Path(device).name
    sys_block = Path("/sys/class/block") / name
    if not sys_block.exists():
        return {}
    disk = sys_block.resolve()
    if (disk / "partition").exists():
        disk = disk.parent

    def read(rel: str) -> str | None:
        try:
            return (disk / rel).read_text().strip()
        except OSError:
            return None

    rotational = read("queue/rotational")
    return {
        "disk": disk.name,
        "model": read("device/model") or read("device/name"),
        "rotational": None if rotational is None else rotational == "1",
        "read_ahead_kib": read("queue/read_ahead_kb"),
        "scheduler": read("queue/scheduler"),
    }


def versions() -> dict[str, str]:
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def describe(data_dir: Path) -> dict:
    """The machine as a report states it; ``data_dir`` is where the benchmark's files live."""
    device, mount, fstype = _mount_of(Path(data_dir))
    statvfs = os.statvfs(data_dir)
    return {
        "cpu": _cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "disk": {
            "device": device,
            "mount": mount,
            "filesystem": fstype,
            "free_gib": round(statvfs.f_bavail * statvfs.f_frsize / 2**30, 1),
            **_block_device(device),
        },
        "versions": versions(),
    }


def summary(machine: dict) -> str:
    """One line: CPU, cores, memory, disk."""
    disk = machine["disk"]
    kind = {True: "reported rotational", False: "reported non-rotational", None: ""}[disk.get("rotational")]
    model = " ".join(x for x in (disk.get("model"), kind) if x)
    return (
        f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; "
        f"data on {disk['filesystem']} ({disk['device']}{', ' + model if model else ''})"
    )
