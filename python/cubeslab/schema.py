"""What a store holds and what its arrays are called, as the engine (which writes them) defines them."""

from __future__ import annotations

import json
import os

from . import _engine

_ARRAYS = _engine.survey_arrays()

AMPLITUDE: str = _ARRAYS["amplitude"]
TRACE_MASK: str = _ARRAYS["trace_mask"]
RAW_HEADERS: str = _ARRAYS["raw_headers"]
FILE_HEADER: str = _ARRAYS["file_header"]
CDP_X: str = _ARRAYS["cdp_x"]
CDP_Y: str = _ARRAYS["cdp_y"]
STATS_V1: str = _engine.stats_attribute()
"""The main array's attribute with MDIO's statistics of its data, which a write that changes it removes."""
_STATES = _engine.store_states()
COMPLETE: str = _STATES["complete"]
"""The state of a store an ingest finished."""
CREATED: str = _STATES["created"]
"""The state of a store ``create`` made (a chunk never written holds the fill value)."""
FOREIGN: str = _STATES["foreign"]
"""The state of a store that records none (another tool's, or a plain ``Array``'s)."""
MAIN_ARRAY_ATTRIBUTE: str = _engine.main_array_attribute()
"""Where, in a group's MDIO ``attributes`` entry, a store names its main array."""


SEGY_SUFFIXES = (".sgy", ".segy", ".seg")
"""The names of SEG-Y files, in any case: what ``export`` writes as SEG-Y."""


def is_segy_survey(contents: dict) -> bool:
    """Whether a store (as :func:`store_contents` gives it) holds a survey ingested from SEG-Y."""
    return contents["node_type"] == "group" and os.path.basename(contents["main"]) == AMPLITUDE


def is_bookkeeping(key: str, value) -> bool:
    """An attribute that records the store rather than describes the data: cubeslab's own entry (a group's
    or an array's), and MDIO's ``attributes`` entry when it only names the main array."""
    return key == "cubeslab" or (
        key == "attributes" and isinstance(value, dict) and set(value) <= {MAIN_ARRAY_ATTRIBUTE}
    )


def store_contents(path: str | os.PathLike, *, to_read: bool = True) -> dict:
    """What a store holds, as the engine reads it: ``node_type``, ``state``, ``attributes``
    (a group's), ``main`` (the array reads go to) and ``copies`` (its orientation copies).
    ``to_read``: refused (:class:`IncompleteStoreError`, :class:`StoreChangedError`) unless
    the store may be read."""
    options = getattr(path, "storage_options", None)  # an S3Path's connection
    return json.loads(_engine.store_contents(os.fspath(path), to_read, options))
