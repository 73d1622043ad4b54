"""imzML: an XML description (mzML with imaging terms) and a binary ``.ibd`` file of spectra. The XML is
parsed with a streaming parser (``xml.etree.ElementTree.iterparse``, each spectrum's elements freed once
read), so a file of a million spectra needs memory for their offsets only.

What comes out (:class:`Imzml`): the mode (continuous: one m/z array shared by every pixel; processed: an
m/z array per pixel), each spectrum's pixel position and the offset, length and encoding of its m/z and
intensity arrays in the ``.ibd``, the ``.ibd``'s UUID and checksum, and the instrument metadata."""

from __future__ import annotations

import hashlib
import os
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import InvalidInputError

MZML_NS = "{http://psi.hupo.org/ms/mzml}"

# Binary data types by accession (and by name, which some writers use with other accessions).
DATA_TYPES = {
    "MS:1000521": np.float32,
    "MS:1000523": np.float64,
    "MS:1000519": np.int32,
    "MS:1000522": np.int64,
    "IMS:1000141": np.int8,
    "IMS:1000142": np.int16,
    "IMS:1100000": np.int8,
    "IMS:1100001": np.int16,
}
DATA_TYPE_NAMES = {
    "32-bit float": np.float32,
    "64-bit float": np.float64,
    "32-bit integer": np.int32,
    "64-bit integer": np.int64,
    "8-bit integer": np.int8,
    "16-bit integer": np.int16,
}
NO_COMPRESSION, ZLIB = "MS:1000576", "MS:1000574"
MZ_ARRAY, INTENSITY_ARRAY = "MS:1000514", "MS:1000515"
CONTINUOUS, PROCESSED = "IMS:1000030", "IMS:1000031"
UUID, IBD_MD5, IBD_SHA1 = "IMS:1000080", "IMS:1000090", "IMS:1000091"
POSITION = {"IMS:1000050": 0, "IMS:1000051": 1, "IMS:1000052": 2}
ARRAY_LENGTH, OFFSET, ENCODED_LENGTH = "IMS:1000103", "IMS:1000102", "IMS:1000104"
PIXEL_SIZE_X, PIXEL_SIZE_Y = "IMS:1000046", "IMS:1000047"
POLARITY = {"MS:1000129": "negative", "MS:1000130": "positive"}


@dataclass
class BinaryArray:
    """How one kind of array (m/z or intensity) is encoded."""

    dtype: np.dtype
    zlib: bool


@dataclass
class Imzml:
    """A parsed imzML file; per-spectrum columns are numpy arrays in file order."""

    path: str
    ibd: str
    continuous: bool
    uuid: bytes | None
    checksum: tuple[str, str] | None  # ("sha1" or "md5", hex digest)
    mz: BinaryArray
    intensity: BinaryArray
    position: np.ndarray  # (n, 3) int64: x, y, z as the file numbers them
    mz_offset: np.ndarray
    mz_length: np.ndarray
    mz_encoded: np.ndarray
    intensity_offset: np.ndarray
    intensity_length: np.ndarray
    intensity_encoded: np.ndarray
    metadata: dict = field(default_factory=dict)

    @property
    def n_spectra(self) -> int:
        return len(self.position)


def _params(element) -> list[tuple[str, str, str]]:
    return [
        (p.get("accession", ""), p.get("name", ""), p.get("value", ""))
        for p in element.iter(f"{MZML_NS}cvParam")
    ]


def _binary_kind(path, where: str, params) -> tuple[str, BinaryArray]:
    """("mz" or "intensity", its encoding) from a binaryDataArray's own and referenced parameters."""
    kind, dtype, zlib = None, None, False
    for accession, name, _ in params:
        if accession == MZ_ARRAY:
            kind = "mz"
        elif accession == INTENSITY_ARRAY:
            kind = "intensity"
        elif accession in DATA_TYPES or name in DATA_TYPE_NAMES:
            dtype = DATA_TYPES.get(accession) or DATA_TYPE_NAMES[name]
        elif accession == ZLIB:
            zlib = True
        elif "compression" in name and accession != NO_COMPRESSION:
            raise InvalidInputError(f"{path}: {where}: compression {name} ({accession}) is not supported")
        elif "bit" in name and ("float" in name or "integer" in name):
            raise InvalidInputError(f"{path}: {where}: unknown data type {name} ({accession})")
    if kind is None:
        raise InvalidInputError(f"{path}: {where}: a binary data array that is neither m/z nor intensity")
    if dtype is None:
        raise InvalidInputError(f"{path}: {where}: the {kind} array has no data type")
    return kind, BinaryArray(np.dtype(dtype).newbyteorder("<"), zlib)


def ibd_of(path: str | os.PathLike) -> str:
    """The ``.ibd`` file beside an imzML file."""
    return os.path.splitext(os.fspath(path))[0] + ".ibd"


def parse(
    path: str | os.PathLike, on_checksum: Callable[[tuple[str, str] | None], None] | None = None
) -> Imzml:
    """Parse ``path`` (.imzML) and find its ``.ibd`` beside it; errors name the file and the element.
    ``on_checksum`` is called with the ``.ibd``'s checksum as soon as the parse reaches it (the file's
    head), so the ``.ibd`` can be hashed while the spectra are parsed."""
    path = os.fspath(path)
    ibd = ibd_of(path)
    groups: dict[str, list] = {}
    metadata: dict = {}
    file_params: list = []
    arrays: dict[str, BinaryArray] = {}
    rows: list[tuple] = []
    root_seen = False
    spectrum_count = 0
    try:
        for event, element in ET.iterparse(path, events=("start", "end")):
            tag = element.tag
            if event == "start":
                if not root_seen:
                    root_seen = True
                    if tag != f"{MZML_NS}mzML":
                        raise InvalidInputError(f"{path}: not imzML (the root element is {tag}, not mzML)")
                continue
            if tag == f"{MZML_NS}referenceableParamGroup":
                groups[element.get("id", "")] = _params(element)
                element.clear()
            elif tag == f"{MZML_NS}fileContent":
                file_params = _params(element)
                if on_checksum is not None:
                    on_checksum(_checksum({a: v for a, _, v in file_params}))
            elif tag == f"{MZML_NS}scanSettings":
                for accession, _, value in _params(element):
                    if accession in (PIXEL_SIZE_X, PIXEL_SIZE_Y):
                        metadata["pixel_size_um"] = [*metadata.get("pixel_size_um", []), float(value)]
            elif tag == f"{MZML_NS}spectrum":
                rows.append(_spectrum(path, element, groups, arrays, spectrum_count))
                spectrum_count += 1
                element.clear()
    except ET.ParseError as error:
        raise InvalidInputError(f"{path}: not well-formed XML: {error}") from None
    except FileNotFoundError:
        raise InvalidInputError(f"{path}: no such file") from None
    if not root_seen:
        raise InvalidInputError(f"{path}: empty file, not imzML")
    accessions = {a: v for a, _, v in file_params}
    if CONTINUOUS in accessions:
        continuous = True
    elif PROCESSED in accessions:
        continuous = False
    else:
        raise InvalidInputError(
            f"{path}: fileContent says neither continuous (IMS:1000030) nor processed mode"
        )
    if not rows:
        raise InvalidInputError(f"{path}: no spectra")
    for group in groups.values():
        for accession, _, _ in group:
            if accession in POLARITY:
                metadata["polarity"] = POLARITY[accession]
    uuid = accessions.get(UUID)
    uuid_bytes = bytes.fromhex(uuid.strip("{}").replace("-", "")) if uuid else None
    checksum = _checksum(accessions)
    if uuid:
        metadata["ibd_uuid"] = uuid_bytes.hex() if uuid_bytes else uuid
    table = np.array(rows, dtype=np.int64)
    return Imzml(
        path=path, ibd=ibd, continuous=continuous, uuid=uuid_bytes, checksum=checksum,
        mz=arrays["mz"], intensity=arrays["intensity"], position=table[:, 0:3],
        mz_offset=table[:, 3], mz_length=table[:, 4], mz_encoded=table[:, 5],
        intensity_offset=table[:, 6], intensity_length=table[:, 7], intensity_encoded=table[:, 8],
        metadata=metadata,
    )  # fmt: skip


def _checksum(accessions: dict) -> tuple[str, str] | None:
    """("sha1" or "md5", hex digest) of the ``.ibd`` as fileContent gives it, if it does."""
    if IBD_SHA1 in accessions:
        return "sha1", accessions[IBD_SHA1].lower()
    if IBD_MD5 in accessions:
        return "md5", accessions[IBD_MD5].lower()
    return None


def _spectrum(path, element, groups: dict, arrays: dict, index: int) -> tuple:
    where = f"spectrum {index} ({element.get('id', '?')})"
    position = [1, 1, 1]
    seen = set()
    scans = element.find(f"{MZML_NS}scanList")
    for accession, _, value in _params(scans if scans is not None else element):
        if accession in POSITION:
            position[POSITION[accession]] = int(value)
            seen.add(accession)
    if not {"IMS:1000050", "IMS:1000051"} <= seen:
        raise InvalidInputError(f"{path}: {where}: no pixel position (IMS:1000050/1000051)")
    found: dict[str, tuple[int, int, int]] = {}
    for array in element.iter(f"{MZML_NS}binaryDataArray"):
        params = []
        for ref in array.iter(f"{MZML_NS}referenceableParamGroupRef"):
            if ref.get("ref") not in groups:
                raise InvalidInputError(
                    f"{path}: {where}: refers to an unknown parameter group {ref.get('ref')}"
                )
            params += groups[ref.get("ref")]
        own = _params(array)
        kind, encoding = _binary_kind(path, where, params + own)
        if kind in arrays and arrays[kind] != encoding:
            raise InvalidInputError(
                f"{path}: {where}: the {kind} array's encoding differs from the first spectrum's"
            )
        arrays[kind] = encoding
        values = {a: v for a, _, v in own}
        try:
            found[kind] = (int(values[OFFSET]), int(values[ARRAY_LENGTH]), int(values[ENCODED_LENGTH]))
        except (KeyError, ValueError):
            raise InvalidInputError(
                f"{path}: {where}: the {kind} array lacks a valid external offset, array length or "
                "encoded length"
            ) from None
    if set(found) != {"mz", "intensity"}:
        raise InvalidInputError(
            f"{path}: {where}: needs one m/z and one intensity array, has {sorted(found)}"
        )
    return (*position, *found["mz"], *found["intensity"])


def check_ibd(imzml: Imzml) -> None:
    """The ``.ibd`` exists, starts with the UUID the imzML gives and holds every array the offsets name
    (its checksum: :class:`IbdDigest`)."""
    path, ibd = imzml.path, imzml.ibd
    if not os.path.isfile(ibd):
        raise InvalidInputError(f"{path}: its binary file {ibd} does not exist")
    size = os.path.getsize(ibd)
    with open(ibd, "rb") as f:
        head = f.read(16)
    if imzml.uuid is not None and head != imzml.uuid:
        raise InvalidInputError(
            f"{ibd}: UUID {head.hex()} at byte 0 disagrees with the imzML's {imzml.uuid.hex()} ({path})"
        )
    for kind, offsets, encoded in (
        ("m/z", imzml.mz_offset, imzml.mz_encoded),
        ("intensity", imzml.intensity_offset, imzml.intensity_encoded),
    ):
        ends = offsets + encoded
        worst = int(np.argmax(ends))
        if ends[worst] > size:
            raise InvalidInputError(
                f"{ibd}: spectrum {worst}'s {kind} array runs to byte {int(ends[worst])}, past the end of "
                "the "
                f"{size}-byte file"
            )
        if (offsets < 0).any():
            raise InvalidInputError(f"{ibd}: spectrum {int(np.argmin(offsets))}'s {kind} offset is negative")


class IbdDigest:
    """The ``.ibd`` hashed on a thread (hashlib releases the GIL) and checked against the SHA-1 or MD5
    its imzML gives, if it gives one: started from :func:`parse` as soon as the checksum is read, so the
    hash runs beside the rest of the parse and the ingest. Leaving the ``with`` block by an error stops
    the hash; :meth:`check` waits for it and raises if the digests disagree."""

    PIECE = 16 << 20

    def __init__(self, path: str | os.PathLike, enabled: bool = True):
        self.path, self.ibd, self.enabled = os.fspath(path), ibd_of(path), enabled
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.outcome: dict = {}

    def start(self, checksum: tuple[str, str] | None) -> None:
        if self.enabled and checksum is not None and self.thread is None:
            self.thread = threading.Thread(target=self._hash, args=checksum, daemon=True)
            self.thread.start()

    def _hash(self, algorithm: str, expected: str) -> None:
        digest = hashlib.new(algorithm)
        # Read into one buffer, reused: a mapping would fault (SIGBUS) if the file were cut short meanwhile.
        piece = bytearray(self.PIECE)
        try:
            with open(self.ibd, "rb", buffering=0) as f:
                while not self.stop.is_set():
                    got = f.readinto(piece)
                    if not got:
                        break
                    digest.update(memoryview(piece)[:got])
        except OSError as error:  # a missing .ibd is reported by check_ibd
            self.outcome["error"] = InvalidInputError(f"{self.ibd}: cannot be hashed: {error}")
            return
        if self.stop.is_set():
            return
        if digest.hexdigest() != expected:
            self.outcome["error"] = InvalidInputError(
                f"{self.ibd}: {algorithm.upper()} {digest.hexdigest()} disagrees with the imzML's "
                f"{expected} ({self.path})"
            )

    def check(self) -> None:
        if self.thread is not None:
            self.thread.join()
            if "error" in self.outcome:
                raise self.outcome["error"]

    def __enter__(self) -> IbdDigest:
        return self

    def __exit__(self, kind, error, trace) -> None:
        if kind is not None and self.thread is not None:
            self.stop.set()
            self.thread.join()


class Spectra:
    """Reads spectra out of the ``.ibd`` (memory-mapped): ``mz(i)``, ``intensity(i)``."""

    def __init__(self, imzml: Imzml):
        self.imzml = imzml
        self.data = np.memmap(imzml.ibd, dtype=np.uint8, mode="r")

    def _array(self, encoding: BinaryArray, offset: int, length: int, encoded: int) -> np.ndarray:
        raw = self.data[offset : offset + (encoded if encoding.zlib else length * encoding.dtype.itemsize)]
        if encoding.zlib:
            import zlib

            values = np.frombuffer(zlib.decompress(bytes(raw)), dtype=encoding.dtype)
        else:
            values = np.frombuffer(raw, dtype=encoding.dtype)
        if len(values) != length:
            raise InvalidInputError(
                f"{self.imzml.ibd}: the array at byte {offset} holds {len(values)} values, the imzML says "
                f"{length}"
            )
        return values

    def mz(self, i: int) -> np.ndarray:
        m = self.imzml
        return self._array(m.mz, int(m.mz_offset[i]), int(m.mz_length[i]), int(m.mz_encoded[i]))

    def intensity(self, i: int) -> np.ndarray:
        m = self.imzml
        return self._array(
            m.intensity, int(m.intensity_offset[i]), int(m.intensity_length[i]), int(m.intensity_encoded[i])
        )


def describe(path: str | os.PathLike) -> dict:
    """What ``cubeslab info`` shows of an imzML file before ingest."""
    imzml = parse(path)
    position = imzml.position
    xs, ys = (
        (int(position[:, 0].min()), int(position[:, 0].max())),
        (int(position[:, 1].min()), int(position[:, 1].max())),
    )
    grid = (xs[1] - xs[0] + 1) * (ys[1] - ys[0] + 1)
    report = {
        "file": imzml.path,
        "format": f"imzML, {'continuous' if imzml.continuous else 'processed'} mode",
        "spectra": imzml.n_spectra,
        "pixels": f"x {xs[0]}..{xs[1]}, y {ys[0]}..{ys[1]} ({grid - imzml.n_spectra} of {grid} missing)",
        "mz_type": imzml.mz.dtype.name + (" zlib" if imzml.mz.zlib else ""),
        "intensity_type": imzml.intensity.dtype.name + (" zlib" if imzml.intensity.zlib else ""),
        "ibd": imzml.ibd,
        "ibd_bytes": os.path.getsize(imzml.ibd) if os.path.isfile(imzml.ibd) else "missing",
        **imzml.metadata,
    }
    if imzml.continuous and os.path.isfile(imzml.ibd):
        mz = Spectra(imzml).mz(0)
        report["mz"] = f"{len(mz):,} values, {float(mz[0]):g}..{float(mz[-1]):g}"
    elif not imzml.continuous:
        report["mz"] = f"per spectrum, {int(imzml.mz_length.min()):,}..{int(imzml.mz_length.max()):,} peaks"
    return report
