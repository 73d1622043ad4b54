"""Overview levels as readers see them: which levels a store's group records, and whether they were made
from its main array's data as it is now (``cubeslab/pyramid.py`` builds them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Level:
    """One overview level: its array's name and its factor along each dimension."""

    name: str
    factors: tuple[int, ...]


def levels_group(main: str) -> str:
    """The group, beside the main array ``main``, that holds its levels: in a group of their own, so that
    xarray's ``open_zarr`` of the store (which reads the arrays beside the main one, each dimension of one
    size) leaves them out."""
    return f"{main}_levels"


def level_name(main: str, level: int) -> str:
    """The path, in the store, of ``main``'s level ``level`` (1 is the first halving)."""
    return f"{levels_group(main)}/{level}"


MADE_FROM = "made_from_data_version"
"""What something derived from an array (overview levels, an MSI cube's sums) records: the array's
:func:`data_version` it was made from, so that a later window write shows it stale."""


def data_version(metadata: dict) -> int:
    """How many flushes have changed an array's data (counted by the engine's window writes), from its
    ``zarr.json``."""
    return int(metadata.get("attributes", {}).get("cubeslab", {}).get("data_version", 0))


def recorded_levels(record: dict) -> list[Level]:
    """The levels a group's ``cubeslab.pyramid`` record lists."""
    return [Level(level["array"], tuple(level["factors"])) for level in record.get("levels", [])]


def fresh_levels(attributes: dict, main_metadata: dict) -> list[Level]:
    """The levels a store's group records, if they were made from the main array's data as it is now."""
    record = attributes.get("cubeslab", {}).get("pyramid")
    if not record or record.get(MADE_FROM) != data_version(main_metadata):
        return []
    return recorded_levels(record)
