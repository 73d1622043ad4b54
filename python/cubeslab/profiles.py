"""Device profiles on disk: where they are saved, and which one a plan uses.

A profile is saved per user, keyed by the device number of the filesystem it
measured, so a plan for a store on that filesystem finds it.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import InvalidInputError


def profile_dir() -> Path:
    """Where profiles are saved: ``$CUBESLAB_PROFILE_DIR``, else ``$XDG_CONFIG_HOME/cubeslab/profiles``."""
    if "CUBESLAB_PROFILE_DIR" in os.environ:
        return Path(os.environ["CUBESLAB_PROFILE_DIR"])
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config / "cubeslab" / "profiles"


def _device(path: str | os.PathLike) -> int:
    """Device number of the filesystem holding ``path`` (or its nearest existing parent)."""
    p = Path(path).absolute()
    while not p.exists():
        p = p.parent
    return p.stat().st_dev


def profile_path(path: str | os.PathLike) -> Path:
    """The default profile file for the filesystem holding ``path``."""
    return profile_dir() / f"device-{_device(path):x}.json"


def find_profile(
    near: str | os.PathLike | None = None, profile: str | os.PathLike | None = None
) -> str | None:
    """The JSON text of the profile to plan with, or None for the built-in typical machine.

    An explicit ``profile`` file wins, then ``$CUBESLAB_PROFILE``, then the saved
    profile of the filesystem holding ``near``.
    """
    for candidate in (profile, os.environ.get("CUBESLAB_PROFILE")):
        if candidate:
            p = Path(candidate)
            if not p.is_file():
                raise InvalidInputError(f"{p}: no such profile file (measure one with `cubeslab profile`)")
            return p.read_text()
    if near is not None:
        p = profile_path(near)
        if p.is_file():
            return p.read_text()
    return None


def auto_profile_enabled() -> bool:
    """Whether a missing profile may be measured on the fly (``CUBESLAB_AUTO_PROFILE``, default on)."""
    return os.environ.get("CUBESLAB_AUTO_PROFILE", "1").strip().lower() not in ("0", "false", "no", "off")
