"""Zarr v3 arrays of data types the engine does not read (MDIO's ``struct`` trace headers, its
``fixed_length_utf32`` file-header holder), decoded chunk by chunk with numpy (and numcodecs for blosc
and zstd). zarr-python 3 reads neither type either. Used for MDIO stores' headers, ``verify`` and
``export`` (see :mod:`cubeslab.mdio`).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CorruptDataError, InvalidInputError, StoreNotFoundError
from .schema import COMPLETE

_SCALARS = {
    "bool": "b1",
    **{f"int{n}": f"i{n // 8}" for n in (8, 16, 32, 64)},
    **{f"uint{n}": f"u{n // 8}" for n in (8, 16, 32, 64)},
    **{f"float{n}": f"f{n // 8}" for n in (16, 32, 64)},
    **{f"complex{n}": f"c{n // 8}" for n in (64, 128)},
}


def _numpy_dtype(spec: Any, endian: str) -> np.dtype:
    """The numpy dtype of a Zarr v3 ``data_type`` (as ``zarr.json`` spells it) in byte order ``endian``."""
    order = "<" if endian == "little" else ">"
    if isinstance(spec, str):
        if spec in _SCALARS:
            return np.dtype(order + _SCALARS[spec])
        if spec.startswith("r") and spec[1:].isdigit() and int(spec[1:]) % 8 == 0:
            return np.dtype(f"V{int(spec[1:]) // 8}")
    elif isinstance(spec, dict):
        name, conf = spec.get("name"), spec.get("configuration") or {}
        if name == "struct" and isinstance(conf.get("fields"), list):
            fields = conf["fields"]
            if isinstance(fields[0], dict):
                return np.dtype([(f["name"], _numpy_dtype(f["data_type"], endian)) for f in fields])
            return np.dtype([(f[0], _numpy_dtype(f[1], endian)) for f in fields])
        if name == "fixed_length_utf32":
            return np.dtype(f"{order}U{int(conf['length_bytes']) // 4}")
        if name in ("fixed_length_bytes", "null_terminated_bytes"):
            return np.dtype(f"S{int(conf['length_bytes'])}")
        if name in _SCALARS or (isinstance(name, str) and name.startswith("r")):
            return _numpy_dtype(name, endian)
    raise InvalidInputError(f"data type {json.dumps(spec)} is not one cubeslab can decode")


def _fill(dtype: np.dtype, value: Any) -> np.ndarray:
    """A zero-dimensional array of ``dtype`` holding the Zarr fill value ``value``."""
    out = np.zeros((), dtype=dtype)
    if dtype.names is not None:
        for name in dtype.names:
            if isinstance(value, dict) and name in value:
                out[name] = _fill(dtype[name], value[name])
        return out
    with contextlib.suppress(TypeError, ValueError):
        out[()] = value if not isinstance(value, str) or dtype.kind == "U" else float(value)
    return out


class ForeignArray:
    """A Zarr v3 array of a data type the engine does not read (MDIO's ``struct``, ``fixed_length_utf32``),
    decoded in Python: regular chunk grid; codecs ``bytes``, then ``blosc``, ``zstd``, ``gzip`` or
    ``crc32c`` (blosc and zstd need ``numcodecs``)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        file = self.path / "zarr.json"
        try:
            self.metadata: dict = json.loads(file.read_bytes())
        except FileNotFoundError:
            raise StoreNotFoundError(f"{self.path}: no Zarr array here (no zarr.json)") from None
        except ValueError as error:
            raise InvalidInputError(f"{file}: invalid metadata: {error}") from None
        meta = self.metadata
        if meta.get("node_type") != "array" or meta.get("zarr_format") != 3:
            raise InvalidInputError(f"{file}: not a Zarr v3 array")
        self.shape = tuple(int(n) for n in meta["shape"])
        grid = meta.get("chunk_grid", {})
        if grid.get("name") != "regular":
            raise InvalidInputError(f"{self.path}: chunk grid {grid.get('name')!r} is not supported")
        self.chunks = tuple(int(n) for n in grid["configuration"]["chunk_shape"])
        codecs = list(meta.get("codecs", []))
        self._bytes_to_bytes = []
        endian = "little"
        for i, codec in enumerate(codecs):
            name = codec.get("name")
            if name == "bytes" and i == 0:
                endian = (codec.get("configuration") or {}).get("endian", "little")
            elif name in ("blosc", "zstd", "gzip", "crc32c") and i > 0:
                self._bytes_to_bytes.append(name)
            else:
                raise InvalidInputError(f"{self.path}: codec {name!r} is not supported here")
        self.dtype = _numpy_dtype(meta.get("data_type"), endian)
        self.fill = _fill(self.dtype, meta.get("fill_value"))
        encoding = meta.get("chunk_key_encoding", {"name": "default"})
        self._v2_keys = encoding.get("name") == "v2"
        self._separator = (encoding.get("configuration") or {}).get(
            "separator", "." if self._v2_keys else "/"
        )

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(math.ceil(n / c) if c else 0 for n, c in zip(self.shape, self.chunks, strict=True))

    def chunk_path(self, indices: tuple[int, ...]) -> Path:
        if self._v2_keys:
            return self.path / (self._separator.join(map(str, indices)) or "0")
        return self.path / self._separator.join(["c", *map(str, indices)])

    def _decode(self, raw: bytes) -> np.ndarray:
        for name in reversed(self._bytes_to_bytes):
            if name == "gzip":
                raw = gzip.decompress(raw)
                continue
            try:
                import numcodecs
            except ImportError:
                raise InvalidInputError(
                    f"{self.path}: decoding its {name} chunks needs numcodecs (pip install numcodecs)"
                ) from None
            codec = getattr(numcodecs, {"blosc": "Blosc", "zstd": "Zstd", "crc32c": "CRC32C"}[name])()
            raw = bytes(codec.decode(raw))
        expected = math.prod(self.chunks) * self.dtype.itemsize
        if len(raw) != expected:
            raise CorruptDataError(f"decodes to {len(raw)} bytes where a chunk has {expected}")
        return np.frombuffer(raw, dtype=self.dtype).reshape(self.chunks)

    def _cells(self) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
        for indices in np.ndindex(*self.grid):
            yield (
                indices,
                tuple(
                    slice(i * c, min((i + 1) * c, n))
                    for i, c, n in zip(indices, self.chunks, self.shape, strict=True)
                ),
            )

    def read(self, field: str | None = None) -> np.ndarray:
        """The whole array (or one field of a struct array), chunk by chunk."""
        dtype = self.dtype if field is None else self.dtype[field]
        fill = self.fill if field is None else self.fill[field]
        out = np.empty(self.shape, dtype=dtype)
        out[...] = fill
        for indices, window in self._cells():
            path = self.chunk_path(indices)
            if not path.is_file():
                continue
            try:
                chunk = self._decode(path.read_bytes())
            except InvalidInputError:  # a codec this module cannot run
                raise
            except Exception as error:
                raise CorruptDataError(f"{path}: cannot decode the chunk: {error}") from None
            part = chunk if field is None else chunk[field]
            out[window] = part[tuple(slice(0, s.stop - s.start) for s in window)]
        return out

    def check(self) -> dict:
        """Every chunk decoded once, as the engine's ``verify`` reports an array."""
        report: dict[str, Any] = {
            "shards": math.prod(self.grid),
            "shards_read": 0,
            "absent_shards": 0,
            "absent_examples": [],
            "bad": [],
        }
        for indices, _ in self._cells():
            path = self.chunk_path(indices)
            key = str(path.relative_to(self.path))
            if not path.is_file():
                if self.shape:  # a zero-dimensional array with no chunk holds attributes only
                    report["absent_shards"] += 1
                    report["absent_examples"] = [*report["absent_examples"], key][:5]
                continue
            try:
                self._decode(path.read_bytes())
            except Exception as error:
                report["bad"].append({"chunk": key, "error": str(error)})
            else:
                report["shards_read"] += 1
        return report


# -- trace headers ----------------------------------------------------------------------------------


def recheck_unreadable(report: dict) -> None:
    """Check in Python the arrays the engine could not open (MDIO's ``struct`` headers, its
    ``fixed_length_utf32`` file header holder): each whose data type and codecs this module
    decodes moves from ``unreadable`` to ``arrays`` with every chunk decoded; ``ok`` is redone."""
    from . import _engine

    store = Path(report["store"])
    still = []
    for entry in report.get("unreadable", []):
        try:
            array = ForeignArray(store / entry["array"])
        except Exception:
            still.append(entry)
            continue
        if array.metadata.get("data_type") in _engine.dtypes():  # the engine's own: its error stands
            still.append(entry)
            continue
        report["arrays"][entry["array"]] = array.check()
    report["unreadable"] = still
    report["arrays"] = dict(sorted(report["arrays"].items()))
    complete = report.get("state") == COMPLETE
    report["ok"] = (
        not str(report.get("state", "")).startswith("incomplete")
        and not still
        and all(not a["bad"] and not (complete and a["absent_shards"]) for a in report["arrays"].values())
    )
