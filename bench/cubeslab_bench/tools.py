"""The tools a study can measure beside cubeslab, and whether this machine has them.

A tool that is not installed is listed as skipped with the reason, never faked.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

MODULES = {
    "segyio": "segyio",
    "h5py": "h5py",
    "zarr": "zarr",
    "tensorstore": "tensorstore",
    "mdio": "mdio",
    "openvds": "openvds",
    "seismic-zfp": "seismic_zfp",
    "netcdf4": "netCDF4",
    "astropy": "astropy.io.fits",
    "pyhdf": "pyhdf.SD",
    "numpy": "numpy",
    "dask": "distributed",
    "pyimzml": "pyimzml.ImzMLParser",
}
"""Tool name (as ``--peers`` takes it) → the module that must import for it to run."""

INSTALL_HINT = "pip install 'cubeslab[peers]'"


def parse_selection(text: str | None) -> set[str] | None:
    """``--peers a,b`` → the names (None: every tool); unknown names are an error."""
    if text is None or text.strip() in ("", "all"):
        return None
    names = {t.strip().lower() for t in text.split(",") if t.strip()}
    unknown = names - set(MODULES)
    if unknown:
        raise ValueError(f"unknown peer(s) {', '.join(sorted(unknown))}; known: {', '.join(MODULES)}")
    return names


def missing(tool: str) -> str | None:
    """Why ``tool`` cannot run here, or None if it can."""
    try:
        importlib.import_module(MODULES[tool])
    except Exception as error:  # an installed but broken package is skipped too, with its error
        return f"not installed ({type(error).__name__}: {error}; {INSTALL_HINT})"
    if tool == "openvds" and segy_import() is None:
        return "OpenVDS's SEGYImport tool is not installed"
    return None


def segy_import() -> str | None:
    """Path of OpenVDS's SEGYImport command (shipped in the openvds wheel beside the interpreter)."""
    found = shutil.which("SEGYImport")
    if found:
        return found
    beside = Path(sys.executable).with_name("SEGYImport")
    return str(beside) if beside.exists() else None
