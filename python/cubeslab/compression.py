"""Compression by name (``--compress``). The names and the Zarr v3 codec chains they stand
for are defined once, in the engine (``crates/cubeslab-core/src/compress/catalogue/``); every
chunk also gets a crc32c there.
"""

from __future__ import annotations

from .defaults import HELP
from .errors import InvalidInputError

COMPRESSION_HELP: str = HELP["compress"]
"""What ``--compress`` takes, in the engine's words."""


def with_max_error(compress: str | None, max_error: str | float | None) -> str | None:
    """Fold a ``--max-error`` bound into the compression name (it means ZFP tuned for that bound).

    >>> with_max_error(None, "0.5%")
    'zfp:max-error=0.5%'
    """
    if max_error is None:
        return compress
    if compress not in (None, "none"):
        raise InvalidInputError(
            f"--max-error chooses ZFP's parameters itself; drop --compress {compress} "
            "(or give zfp:tolerance=... instead of --max-error)"
        )
    return f"zfp:max-error={max_error}"


TOOLS = ("cubeslab", "zarr-python / xarray.open_zarr", 'xarray engine="cubeslab"', "TensorStore")
"""The readers :func:`readers` answers for, in the order it lists them."""

_EVERYONE = frozenset(TOOLS)
_NUMCODECS = frozenset(TOOLS[:3])
READERS = {
    **dict.fromkeys(("bytes", "crc32c", "sharding_indexed", "zstd", "gzip", "blosc", "transpose"), _EVERYONE),
    # numcodecs' codecs: zarr-python registers them; TensorStore has neither.
    "numcodecs.bitround": _NUMCODECS,
    "numcodecs.zfpy": _NUMCODECS,
    # zarrs' own ZFP codec (expert mode): only zarrs, so cubeslab and its xarray backend.
    "zfp": frozenset(TOOLS[0:1] + TOOLS[2:3]),
    # Text labels' codec: TensorStore has no text type to decode into.
    "vlen-utf8": _NUMCODECS,
}
"""Which tools decode each Zarr v3 codec (by its name in ``zarr.json``)."""

NUMERIC_TYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
    | {"float16", "float32", "float64", "complex64", "complex128"}
)
"""The Zarr v3 data types of numbers and booleans, which every tool reads."""

DATA_TYPES = {
    # TensorStore refuses text; MDIO's header structs it opens only a field at a time, zarr-python not at all.
    "string": _NUMCODECS,
    "fixed_length_utf32": _NUMCODECS,
    "struct": frozenset(TOOLS[0:1] + TOOLS[2:3]),
}
"""Which tools read arrays of each other Zarr v3 data type (by its name in ``zarr.json``)."""


def codec_names(codecs: list[dict]) -> list[str]:
    """Every codec name in a chain, the sharding codec's inner and index chains included."""
    names = []
    for codec in codecs:
        names.append(codec.get("name", ""))
        configuration = codec.get("configuration") or {}
        for key in ("codecs", "index_codecs"):
            names += codec_names(configuration.get(key, []))
    return names


def readers(codecs: list[dict], *, in_group: bool = True) -> list[str]:
    """The tools that read an array whose codec chain is ``codecs``; ``in_group=False`` for a store that
    is the array alone, which xarray's ``open_zarr`` does not open (it opens groups), zarr-python does.

    >>> readers([{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 3}}])
    ['cubeslab', 'zarr-python / xarray.open_zarr', 'xarray engine="cubeslab"', 'TensorStore']
    >>> readers([{"name": "numcodecs.zfpy", "configuration": {"mode": 4, "tolerance": 0.1}}])
    ['cubeslab', 'zarr-python / xarray.open_zarr', 'xarray engine="cubeslab"']
    >>> readers([{"name": "bytes"}], in_group=False)
    ['cubeslab', 'zarr-python', 'xarray engine="cubeslab"', 'TensorStore']
    """
    return _named(_able(codecs), in_group)


def store_readers(arrays: list[dict], *, in_group: bool = True) -> list[str]:
    """The tools that read every array of a store, given each one's ``zarr.json``: its codecs and its data
    type. A tool that refuses one array (TensorStore a text-label coordinate) cannot open the store.

    >>> store_readers([{"data_type": "float32", "codecs": [{"name": "bytes"}]},
    ...                {"data_type": "string", "codecs": [{"name": "vlen-utf8"}]}])
    ['cubeslab', 'zarr-python / xarray.open_zarr', 'xarray engine="cubeslab"']
    """
    able = set(TOOLS)
    for metadata in arrays:
        able &= _able(metadata.get("codecs", [])) & _type_readers(metadata.get("data_type"))
    return _named(able, in_group)


def _able(codecs: list[dict]) -> set[str]:
    able = set(TOOLS)
    for name in codec_names(codecs):
        able &= READERS.get(name, {"cubeslab"})
    return able


def _type_readers(data_type) -> frozenset[str]:
    """The tools that read an array of ``data_type`` (a name, or ``{"name": ..., "configuration": ...}``)."""
    name = data_type.get("name") if isinstance(data_type, dict) else data_type
    if name is None or name in NUMERIC_TYPES:
        return _EVERYONE
    return DATA_TYPES.get(name, frozenset({"cubeslab"}))


def _named(able: set[str], in_group: bool) -> list[str]:
    named = [tool for tool in TOOLS if tool in able]
    return named if in_group else [ZARR_PYTHON if tool == TOOLS[1] else tool for tool in named]


ZARR_PYTHON = "zarr-python"
"""How ``readers`` names zarr-python alone, for a store xarray's ``open_zarr`` does not open."""
