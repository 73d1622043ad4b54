"""The exceptions cubeslab raises.

Every one derives from :class:`CubeslabError` and also from the builtin a
caller would catch without knowing cubeslab (``ValueError``, ``OSError``,
``FileNotFoundError``, ``IndexError``, ...). The Rust engine raises them by
name (``crates/cubeslab-py/src/errors.rs``), so rename with care.
"""

from __future__ import annotations

__all__ = [
    "ClusterError",
    "CorruptDataError",
    "CubeslabError",
    "CubeslabIOError",
    "ExportWarning",
    "GeometryError",
    "IncompleteStoreError",
    "IngestWarning",
    "InternalError",
    "InvalidInputError",
    "LabelError",
    "OptionError",
    "SelectionError",
    "StoreBusyError",
    "StoreChangedError",
    "StoreExistsError",
    "StoreNotFoundError",
]


class CubeslabError(Exception):
    """Base of every cubeslab error."""


class InvalidInputError(CubeslabError, ValueError):
    """Malformed or unsupported input: a SEG-Y header field, a store's metadata."""


class OptionError(InvalidInputError):
    """An option given a value the command cannot use: an unknown name, a number out of range, an option
    that does not apply to this source. A usage error: exit code 2 at the command line."""


class GeometryError(InvalidInputError):
    """Trace headers that do not describe a regular survey (duplicates, wrong byte locations, ...)."""


class StoreNotFoundError(CubeslabError, FileNotFoundError):
    """No store or file at the given path."""


class StoreExistsError(CubeslabError, FileExistsError):
    """The target exists; pass ``overwrite=True`` (``--overwrite``) to replace it."""


class IncompleteStoreError(CubeslabError, OSError):
    """The ingest that wrote the store did not finish."""


class StoreBusyError(CubeslabError, OSError):
    """Another live process is writing the store (it holds the store's ``.cubeslab.lock``)."""


class StoreChangedError(CubeslabError, OSError):
    """Another process replaced the store (``--overwrite``) while it was open: open it again."""


class CorruptDataError(CubeslabError, OSError):
    """Stored bytes fail their checksum or are structurally damaged."""


class SelectionError(CubeslabError, IndexError):
    """A selection outside the array."""


class LabelError(CubeslabError, KeyError):
    """A survey label (inline, crossline, time) that the survey does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CubeslabIOError(CubeslabError, OSError):
    """An operating-system I/O failure."""


class ClusterError(CubeslabError, ConnectionError):
    """A Dask cluster that does not answer, or whose workers cannot do the work (a path they do not see)."""


class InternalError(CubeslabError, RuntimeError):
    """A bug in cubeslab; please report it with the message."""


class IngestWarning(UserWarning):
    """Something an ingest did that its user should know of (a cut-short file read partly, ...)."""


class ExportWarning(UserWarning):
    """Something an export left out that its user should know of (values the format has no place for)."""
