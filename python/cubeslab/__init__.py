"""cubeslab: huge N-D volumes (SEG-Y surveys, any Zarr v3 array), instantly sliceable.

>>> import cubeslab
>>> cube = cubeslab.open("survey.zarr")            # doctest: +SKIP
>>> cube.inline[2400].shape                        # doctest: +SKIP
"""

from . import errors, msi  # noqa: F401 - msi registers its cube kind with open()
from .array import Array, ReadSettings, warn_over_limits_in_environment
from .create import create
from .cube import Cube
from .dask_store import store
from .description import describe
from .errors import *  # noqa: F403 - the exception classes are part of the top-level API
from .ingest import describe_segy, export, ingest
from .opener import open
from .pyramid import build_pyramid
from .verify import verify

__version__ = "0.1.0"

warn_over_limits_in_environment()

__all__ = [
    "Array",
    "Cube",
    "ReadSettings",
    "__version__",
    "build_pyramid",
    "create",
    "describe",
    "describe_segy",
    "export",
    "ingest",
    "open",
    "store",
    "verify",
    *errors.__all__,
]
