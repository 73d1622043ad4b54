"""Compression by name (``--compress``). The names and the Zarr v3 codec chains they stand
for are defined once, in the engine (``crates/cubeslab-core/src/compress/name.rs``); every
chunk also gets a crc32c there.
"""

from __future__ import annotations

from .errors import InvalidInputError

COMPRESSION_HELP = (
    "none, zstd[:LEVEL], gzip[:LEVEL], blosc-lz4[:LEVEL], blosc-zstd[:LEVEL][,shuffle=byte|bit|none], "
    "bitround:KEEPBITS, zfp:tolerance=T, zfp:precision=P, zfp:rate=R, zfp:reversible, "
    "zfp:snr=DB, zfp:max-error=E[%]"
)
"""What ``--compress`` takes."""


def with_max_error(compress: str | None, max_error: str | float | None) -> str | None:
    """Fold a ``--max-error`` bound into the compression name (it means ZFP tuned for that bound).

    >>> with_max_error(None, "0.5%")
    'zfp:max-error=0.5%'
    """
    if max_error is None:
        return compress
    if compress not in (None, "none"):
        raise InvalidInputError(
            f"--max-error chooses ZFP's parameters itself; drop --compress {compress} "
            "(or give zfp:tolerance=... instead of --max-error)"
        )
    return f"zfp:max-error={max_error}"
