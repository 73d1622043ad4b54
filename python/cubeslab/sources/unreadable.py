"""The boundary between cubeslab and the libraries that parse other formats (numpy, astropy, h5py,
netCDF4, zlib): a damaged or unexpected file makes them raise whatever they raise. Inside
:func:`reading`, such an error becomes an :class:`InvalidInputError` naming the file and the library's
own words (the card, key, attribute or offset it stopped at), never a traceback."""

from __future__ import annotations

import os
import struct
import tokenize
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import CubeslabError, InvalidInputError

PARSER_ERRORS = (
    ValueError, TypeError, KeyError, IndexError, OverflowError, MemoryError, EOFError,
    zlib.error, struct.error, tokenize.TokenError,
)  # fmt: skip
"""What a parser raises on input it cannot make sense of (astropy's VerifyError is a ValueError's
sibling: it is caught by name below)."""


@contextmanager
def reading(path: str | os.PathLike) -> Iterator[None]:
    """Turn a parser's failure on ``path`` into an error naming it; cubeslab's own errors pass as they are."""
    try:
        yield
    except CubeslabError:
        raise
    except PARSER_ERRORS as error:
        raise InvalidInputError(f"{path}: cannot read it: {_words(error)}") from error
    except OSError as error:
        if error.errno is not None:  # the system's (a full disk while the store is written): as it is
            raise
        # The HDF5 library's, through h5py: a filter that failed on a damaged chunk, a truncated file.
        raise InvalidInputError(f"{path}: cannot read it: {_words(error)}") from error
    except RuntimeError as error:
        if not str(error).startswith("NetCDF:"):
            raise
        # netCDF-C's, through netCDF4 (which calls every library error "NetCDF: ..."): a damaged chunk.
        raise InvalidInputError(f"{path}: cannot read it: {_words(error)}") from error
    except Exception as error:
        if type(error).__name__ != "VerifyError":  # astropy's, for a card it cannot parse
            raise
        raise InvalidInputError(f"{path}: cannot read it: {_words(error)}") from error


def _words(error: BaseException) -> str:
    text = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
