"""cubeslab: huge N-D volumes (SEG-Y surveys, any Zarr v3 array), instantly sliceable.

>>> import cubeslab
>>> cube = cubeslab.open("survey.zarr")            # doctest: +SKIP
>>> cube.inline[2400].shape                        # doctest: +SKIP
"""

from .array import Array, ReadSettings
from .cube import Cube, open
from .errors import (
    CorruptDataError,
    CubeslabError,
    CubeslabIOError,
    GeometryError,
    IncompleteStoreError,
    InternalError,
    InvalidInputError,
    LabelError,
    SelectionError,
    StoreExistsError,
    StoreNotFoundError,
)
from .ingest import export, ingest

__version__ = "0.1.0"

__all__ = [
    "Array",
    "CorruptDataError",
    "Cube",
    "CubeslabError",
    "CubeslabIOError",
    "GeometryError",
    "IncompleteStoreError",
    "InternalError",
    "InvalidInputError",
    "LabelError",
    "ReadSettings",
    "SelectionError",
    "StoreExistsError",
    "StoreNotFoundError",
    "__version__",
    "export",
    "ingest",
    "open",
]
