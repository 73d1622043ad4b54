"""FITS images, read with astropy (the ``fits`` extra): the HDU's header is kept as attributes, linear
WCS axes become the store's axes (origin, step, unit), and BSCALE, BZERO and BLANK are applied as astropy
applies them, slab by slab from a memory map of the raw values (astropy itself loads a scaled image
whole). FITS lists NAXIS1 fastest; the store's axes are numpy's, NAXISn first."""

from __future__ import annotations

import math
import os

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
    naxis = int(header["NAXIS"])
    axes = []
    for i in range(naxis, 0, -1):
        ctype = str(header.get(f"CTYPE{i}", "") or f"axis{i}")
        linear = "-" not in ctype.strip("-") or len(ctype) <= 4
        step = float(header.get(f"CDELT{i}", 1.0)) if linear else 1.0
        origin = (
            float(header.get(f"CRVAL{i}", 0.0)) + (1 - float(header.get(f"CRPIX{i}", 1.0))) * step
            if linear
            else 0.0
        )
        if not (math.isfinite(origin) and math.isfinite(step)):
            raise InvalidInputError(
                f"{path}: HDU {hdu} axis {i}: CRVAL{i}, CRPIX{i} and CDELT{i} give no finite coordinates"
            )
        axes.append(
            {
                "name": ctype.strip() or f"axis{i}",
                "origin": origin,
                "step": step,
                "unit": header.get(f"CUNIT{i}") or None,
            }
        )
    cards = {k: _attribute(v) for k, v in header.items() if k and k not in ("COMMENT", "HISTORY", "")}
    return ArraySource(os.fspath(path), raw, "fits", axes, convert=scale, stored_dtype=dtype,
                       attributes={"fits_header": cards, "fits_hdu": hdu})  # fmt: skip
