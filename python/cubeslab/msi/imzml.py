"""imzML: an XML description (mzML with imaging terms) and a binary ``.ibd`` file of spectra. The XML is
read by the engine with a streaming parser, so a file of a million spectra needs memory for their offsets
only.

What comes out (:class:`Imzml`): the mode (continuous: one m/z array shared by every pixel; processed: an
m/z array per pixel), each spectrum's pixel position and the offset, length and encoding of its m/z and
intensity arrays in the ``.ibd``, the ``.ibd``'s UUID and checksum, and the instrument metadata."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field

import numpy as np

from .. import _engine
from ..errors import InvalidInputError


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


def ibd_of(path: str | os.PathLike) -> str:
    """The ``.ibd`` file beside an imzML file."""
    return os.path.splitext(os.fspath(path))[0] + ".ibd"


def parse(path: str | os.PathLike) -> Imzml:
    """Parse ``path`` (.imzML) and find its ``.ibd`` beside it; errors name the file and the element."""
    path = os.fspath(path)
    description, table = _engine.read_imzml_index(path)
    found = json.loads(description)
    metadata: dict = {}
    if found["pixel_size_um"]:
        metadata["pixel_size_um"] = found["pixel_size_um"]
    if found["polarity"]:
        metadata["polarity"] = found["polarity"]
    uuid = found["uuid"]
    uuid_bytes = None
    if uuid:
        try:
            uuid_bytes = bytes.fromhex(uuid.strip("{}").replace("-", ""))
        except ValueError:
            raise InvalidInputError(f"{path}: the .ibd UUID {uuid!r} is not hexadecimal") from None
        metadata["ibd_uuid"] = uuid_bytes.hex()
    rows = np.frombuffer(table, dtype=np.int64).reshape(-1, 9)
    encoding = {
        kind: BinaryArray(np.dtype(found[kind]["dtype"]).newbyteorder("<"), found[kind]["zlib"])
        for kind in ("mz", "intensity")
    }
    return Imzml(
        path=path, ibd=ibd_of(path), continuous=found["continuous"], uuid=uuid_bytes,
        checksum=tuple(found["checksum"]) if found["checksum"] else None,
        mz=encoding["mz"], intensity=encoding["intensity"], position=rows[:, 0:3],
        mz_offset=rows[:, 3], mz_length=rows[:, 4], mz_encoded=rows[:, 5],
        intensity_offset=rows[:, 6], intensity_length=rows[:, 7], intensity_encoded=rows[:, 8],
        metadata=metadata,
    )  # fmt: skip


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
    m = imzml
    for kind, encoding, offsets, lengths, encoded in (
        ("m/z", m.mz, m.mz_offset, m.mz_length, m.mz_encoded),
        ("intensity", m.intensity, m.intensity_offset, m.intensity_length, m.intensity_encoded),
    ):
        # An array's bytes are its values' unless compressed: a data type declared wrongly reads garbage.
        itemsize = encoding.dtype.itemsize
        wrong = np.flatnonzero(encoded != lengths * itemsize) if not encoding.zlib else np.array([], int)
        if len(wrong):
            i = int(wrong[0])
            raise InvalidInputError(
                f"{path}: spectrum {i}'s {kind} array is {int(encoded[i])} bytes for {int(lengths[i])} "
                f"values of the {encoding.dtype.name} the file declares ({int(lengths[i]) * itemsize} "
                "bytes); its data type or length is wrong"
            )
        if (offsets < 0).any():
            raise InvalidInputError(f"{ibd}: spectrum {int(np.argmin(offsets))}'s {kind} offset is negative")
        # Compared without adding offset and length, which could pass the largest int64 and wrap.
        past = (offsets > size) | (encoded > size - np.minimum(offsets, size))
        if past.any():
            worst = int(np.argmax(past))
            end = int(offsets[worst]) + int(encoded[worst])
            raise InvalidInputError(
                f"{ibd}: spectrum {worst}'s {kind} array runs to byte {end}, past the end of the "
                f"{size}-byte file"
            )


class IbdDigest:
    """The ``.ibd`` hashed on a thread (hashlib releases the GIL) and checked against the SHA-1 or MD5
    its imzML gives, if it gives one: started once the file is parsed, so the hash runs beside the
    ingest. Leaving the ``with`` block by an error stops the hash; :meth:`check` waits for it and raises
    if the digests disagree."""

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

            # Inflated to one byte past what the imzML announces at most: a bomb is caught, not unpacked.
            expected = length * encoding.dtype.itemsize
            inflated = zlib.decompressobj().decompress(bytes(raw), expected + 1)
            if len(inflated) != expected:
                held = f"more than {expected}" if len(inflated) > expected else f"only {len(inflated)}"
                raise InvalidInputError(
                    f"{self.imzml.ibd}: the zlib array at byte {offset} inflates to {held} bytes; the imzML "
                    f"says {length} values ({expected} bytes)"
                )
            return np.frombuffer(inflated, dtype=encoding.dtype)
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
