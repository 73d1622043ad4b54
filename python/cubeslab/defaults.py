"""Option defaults as the engine defines them (its option types, in Rust): the Python API and the
command line take theirs from here, so each is written once."""

from __future__ import annotations

import json

from . import _engine

INGEST: dict = json.loads(_engine.ingest_defaults())

INLINE_BYTE: int = INGEST["inline_byte"]
CROSSLINE_BYTE: int = INGEST["crossline_byte"]
OFFSET_BYTE: int = INGEST["offset_byte"]
LAYOUT: str = INGEST["layout"]
COMPRESS: str = INGEST["compress"]
VERTICAL: str = INGEST["vertical"]
ENDIAN: str = INGEST["endian"]
MEMORY_LIMIT: int = INGEST["memory_limit"]
