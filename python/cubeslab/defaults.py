"""Option defaults and help, as the engine's option types define them (in Rust): the Python API
and the command line take theirs from here, so each is written once."""

from __future__ import annotations

from . import _engine

INGEST = _engine.IngestOptions()
"""An ingest's options with every field at its default."""

HELP: dict[str, str] = _engine.IngestOptions.help()
"""A sentence of help for each ingest option, by name."""

INLINE_BYTE: int = INGEST.inline_byte
CROSSLINE_BYTE: int = INGEST.crossline_byte
OFFSET_BYTE: int = INGEST.offset_byte
LAYOUT: str = INGEST.layout
COMPRESS: str = INGEST.compress
DTYPE: str = INGEST.dtype
VERTICAL: str = INGEST.vertical
ENDIAN: str = INGEST.endian
MEMORY_LIMIT: int = INGEST.memory_limit
HEADER_BYTES = (1, 237)
"""Where a 4-byte trace header field (inline, crossline, offset) may start: inside the 240 bytes."""

WRITE_CACHE: int = _engine.write_cache_default()
"""Bytes of decoded chunks an array open for writing holds, unless told."""

PLAN_STATE, PLAN_TOP = _engine.plan_defaults()
"""The cache state a plan is made for, and how many plans it returns, unless told."""

PYRAMID_MAX_SIDE: int = 1024
"""Overview levels are added until no downsampled axis is longer than this (a screen's width)."""
