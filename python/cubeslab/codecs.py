"""Compression settings by name → Zarr v3 codec JSON: the one place the names are defined.

Every chunk also gets a crc32c after these codecs; that is added by the engine.
"""

from __future__ import annotations

from .errors import InvalidInputError

COMPRESSION_NAMES = ("none", "zstd[:level]", "gzip[:level]", "blosc-lz4", "blosc-zstd[:level]")


def compressors(spec: str | None, itemsize: int = 4) -> list[dict]:
    """Codec list for a compression spec such as ``"zstd:3"`` (``None`` or ``"none"``: no compression).

    >>> compressors("zstd:5")
    [{'name': 'zstd', 'configuration': {'level': 5, 'checksum': False}}]
    """
    if spec is None or spec == "none":
        return []
    name, _, arg = spec.partition(":")
    try:
        level = int(arg) if arg else None
    except ValueError:
        raise InvalidInputError(f"compression level must be an integer in {spec!r}") from None
    if name == "zstd":
        return [
            {"name": "zstd", "configuration": {"level": 3 if level is None else level, "checksum": False}}
        ]
    if name == "gzip":
        return [{"name": "gzip", "configuration": {"level": 5 if level is None else level}}]
    if name in ("blosc-lz4", "blosc-zstd"):
        return [
            {
                "name": "blosc",
                "configuration": {
                    "cname": name.split("-")[1],
                    "clevel": 5 if level is None else level,
                    "shuffle": "shuffle",
                    "typesize": itemsize,
                    "blocksize": 0,
                },
            }
        ]
    raise InvalidInputError(f"unknown compression {spec!r}; choose one of {', '.join(COMPRESSION_NAMES)}")
