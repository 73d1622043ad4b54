"""FITS images, read with astropy (the ``fits`` extra): the HDU's header is kept as attributes, linear
separable WCS axes become the store's axes (origin, step, unit; the others stay pixel indices), and
BSCALE, BZERO and BLANK are applied as astropy applies them, slab by slab from a memory map of the raw
values (astropy itself loads a scaled image whole). FITS lists NAXIS1 fastest; the store's axes are
numpy's, NAXISn first."""

from __future__ import annotations

import math
import os
import re

import numpy as np

from ..errors import InvalidInputError
from .raw import ArraySource

FITS_MAGIC = b"SIMPLE  ="


def _astropy():
    try:
        from astropy.io import fits
    except ImportError:
        raise InvalidInputError(
            "reading FITS needs astropy: pip install 'cubeslab[fits]' (or astropy)"
        ) from None
    return fits


def _scaler(header, bitpix: int):
    """The conversion astropy applies to raw values (``ImageHDU._scale_data``), and its result type."""
    bscale, bzero = float(header.get("BSCALE", 1)), float(header.get("BZERO", 0))
    blank = header.get("BLANK") if bitpix > 0 else None
    if not isinstance(blank, int):  # astropy ignores a BLANK that is not an integer (True counts as 1)
        blank = None
    raw_type = {8: np.uint8, 16: np.int16, 32: np.int32, 64: np.int64, -32: np.float32, -64: np.float64}[
        bitpix
    ]
    if bscale == 1 and bzero == 0 and blank is None:
        return None, np.dtype(raw_type)
    if bscale == 1 and bitpix > 8 and bzero == 2 ** (bitpix - 1):  # FITS's unsigned integers
        unsigned = np.dtype(f"uint{bitpix}")
        return (
            lambda raw: (raw.astype(np.int64 if bitpix < 64 else np.uint64) + int(bzero)).astype(unsigned)
        ), unsigned
    if bscale == 1 and bitpix == 8 and bzero == -128:  # signed bytes
        return (lambda raw: (raw.astype(np.int16) - 128).astype(np.int8)), np.dtype(np.int8)
    target = np.dtype(np.float32 if bitpix in (8, 16, -32) else np.float64)

    def scale(raw: np.ndarray) -> np.ndarray:
        data = np.array(raw, dtype=target)
        if bscale != 1:
            np.multiply(data, bscale, data)
        if bzero != 0:
            data += bzero
        if blank is not None:
            data[raw == blank] = np.nan
        return data

    return scale, target


def _attribute(value):
    return value if isinstance(value, (bool, int, float, str)) else str(value)


# AIPS's spectral axes that are linear despite their suffix (a reference frame, not an algorithm): FREQ-LSR,
# VELO-HEL... (FELO-xxx is not: wcslib reads it as optical velocity, non-linear in frequency).
AIPS_FRAMES = {"LSR", "HEL", "OBS", "LSD", "GEO", "BAR", "TOP"}


def _number(header, key: str, default: float, where: str) -> float:
    value = header.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"{where}: {key} = {value!r} is not a number")
    return float(value)


def _is_linear(ctype: str) -> bool:
    """Whether CTYPE names a linear axis: no algorithm code after its 4-character type (``FREQ``,
    ``LINEAR``, but not ``RA---TAN``, ``FREQ-LOG`` or ``WAVE-TAB``), or an AIPS frame on FREQ or VELO."""
    code = re.match(r"(.{4})-+([^-].*)$", ctype.strip())
    if code is None:
        return True
    return code[1] in ("FREQ", "VELO") and code[2] in AIPS_FRAMES


def _matrix_cards(header, kind: str) -> dict[tuple[int, int], str]:
    """The header's ``PCi_j`` or ``CDi_j`` cards (also the older ``PC00i00j`` form) by ``(i, j)``."""
    cards = {}
    for key in header:
        found = re.fullmatch(rf"{kind}(\d+)_(\d+)|{kind}(\d{{3}})(\d{{3}})", str(key))
        if found:
            i, j = (int(n) for n in found.groups() if n is not None)
            cards[i, j] = key
    return cards


def _matrix_row(header, i: int, naxis: int, where: str) -> tuple[list[float], str] | None:
    """Row ``i`` of the linear transformation (how each pixel axis moves world axis ``i``) as wcslib
    builds it: PC scaled by CDELT, else CD; None when the header has neither matrix. Also the cards that
    give its diagonal."""

    def row(cards: dict, default) -> list[float]:
        return [
            _number(header, cards[i, j], default(j), where) if (i, j) in cards else default(j)
            for j in range(1, naxis + 1)
        ]

    if pc := _matrix_cards(header, "PC"):
        cdelt = _number(header, f"CDELT{i}", 1.0, where)
        return [value * cdelt for value in row(pc, lambda j: float(i == j))], f"PC{i}_{i} and CDELT{i}"
    if cd := _matrix_cards(header, "CD"):
        # An axis whose CD row and column are all missing or zero gets a unit diagonal (wcslib's cdfix).
        untouched = all(_number(header, key, 0.0, where) == 0 for pair, key in cd.items() if i in pair)
        return row(cd, lambda j: float(untouched and i == j)), f"CD{i}_{i}"
    return None


def _rotated_sky(header, ctype: str) -> bool:
    """Whether CROTA turns this axis (wcslib applies it to celestial axes, even without a projection)."""
    kind = ctype[:4].rstrip("-")
    celestial = kind in ("RA", "DEC") or kind[1:] in ("LON", "LAT") or kind[2:] in ("LN", "LT")
    rotations = [value for key, value in header.items() if re.fullmatch(r"CROTA\d+", str(key))]
    return celestial and any(value != 0 for value in rotations)


def _has_wcs(header, i: int) -> bool:
    """Whether the header says anything of axis ``i``'s world coordinate: an axis it is silent about stays
    pixel indices rather than becoming FITS's default 1, 2, 3..."""
    cards = (f"CTYPE{i}", f"CRVAL{i}", f"CRPIX{i}", f"CDELT{i}", f"CUNIT{i}")
    return any(card in header for card in cards) or any(
        (i, i) in _matrix_cards(header, kind) for kind in ("PC", "CD")
    )


def _axis(header, i: int, where: str) -> dict:
    """FITS axis ``i`` as a store axis: its world coordinate as origin and step where it is linear and
    depends on this pixel axis alone; otherwise pixel indices without a unit (the header keeps the WCS)."""
    ctype = str(header.get(f"CTYPE{i}", "") or "").strip()
    naxis = int(header["NAXIS"])
    pixels = {"name": ctype or f"axis{i}", "origin": 0.0, "step": 1.0, "unit": None}
    if not _is_linear(ctype) or not _has_wcs(header, i):
        return pixels
    row = _matrix_row(header, i, naxis, where)
    if row is None:
        if _rotated_sky(header, ctype):
            return pixels
        step, step_cards = _number(header, f"CDELT{i}", 1.0, where), f"CDELT{i}"
    else:
        matrix, step_cards = row
        if any(value != 0 for j, value in enumerate(matrix, start=1) if j != i):  # rotated: not separable
            return pixels
        step = matrix[i - 1]
    # FITS counts pixels from 1 and CRPIX defaults to 0: the first pixel's world is CRVAL + (1 - CRPIX) step.
    origin = _number(header, f"CRVAL{i}", 0.0, where) + (1 - _number(header, f"CRPIX{i}", 0.0, where)) * step
    if not (math.isfinite(origin) and math.isfinite(step)):
        raise InvalidInputError(f"{where}: CRVAL{i}, CRPIX{i} and {step_cards} give no finite coordinates")
    return pixels | {"origin": origin, "step": step, "unit": header.get(f"CUNIT{i}") or None}


def fits_source(path: str | os.PathLike, hdu: int | None = None) -> ArraySource:
    fits = _astropy()
    try:
        hdus = fits.open(path, memmap=True, do_not_scale_image_data=True)
    except OSError as error:
        raise InvalidInputError(f"{path}: not a FITS file astropy reads: {error}") from None
    with_data = [i for i, h in enumerate(hdus) if getattr(h, "is_image", False) and h.data is not None]
    if hdu is None:
        if not with_data:
            raise InvalidInputError(f"{path}: no HDU holds an image")
        hdu = with_data[0]
    if not 0 <= hdu < len(hdus):
        raise InvalidInputError(f"{path}: HDU {hdu} does not exist (the file has {len(hdus)})")
    if hdu not in with_data:
        raise InvalidInputError(f"{path}: HDU {hdu} holds no image data (images in HDUs {with_data})")
    chosen = hdus[hdu]
    header = chosen.header
    raw = chosen.data  # a memory map of the raw values
    scale, dtype = _scaler(header, int(header["BITPIX"]))
    axes = [_axis(header, i, f"{path}: HDU {hdu} axis {i}") for i in range(int(header["NAXIS"]), 0, -1)]
    cards = {k: _attribute(v) for k, v in header.items() if k and k not in ("COMMENT", "HISTORY", "")}
    return ArraySource(os.fspath(path), raw, "fits", axes, convert=scale, stored_dtype=dtype,
                       attributes={"fits_header": cards, "fits_hdu": hdu})  # fmt: skip
