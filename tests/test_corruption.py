"""Corruption detection: a damaged store gives an error naming the
array and chunk, with bounded memory, and `verify` names every damaged chunk; never wrong numbers.

Cases: C1 bit flips in 100 random chunks, C2 truncated / zero-filled shards and impossible indexes,
C3 damaged zarr.json, C4 verify always checks, C5 decompression bombs."""

from __future__ import annotations

import json
import os
import resource

import numpy as np
import pytest
from test_store import crc32c  # the independent bitwise oracle

import cubeslab

SHAPE, CHUNKS, SHARDS = (48, 40, 64), (4, 8, 8), (16, 16, 32)
N_PER_SHARD = 4 * 2 * 4


def store_of(tmp_path, compress=None, name="a.zarr"):
    data = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    path = tmp_path / name
    cubeslab.Array.from_numpy(path, data, chunks=CHUNKS, shards=SHARDS, compress=compress)
    return path, data


def shard_files(path):
    return sorted(p for p in (path / "c").rglob("*") if p.is_file())


def index_of(raw: bytes, n: int) -> np.ndarray:
    return np.frombuffer(raw[-(n * 16 + 4) : -4], dtype="<u8").reshape(n, 2)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- C1 --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [None, "zstd:3", "blosc-lz4", "zfp:rate=12"])
def test_bit_flips_in_100_random_chunks_are_all_detected_and_named(tmp_path, compress):
    path, _ = store_of(tmp_path, compress)
    rng = np.random.default_rng(7)
    absent = 2**64 - 1  # chunks past the array's edge are not stored
    chunks = [
        (shard, i)
        for shard in shard_files(path)
        for i, (offset, _) in enumerate(index_of(shard.read_bytes(), N_PER_SHARD))
        if offset != absent
    ]
    chosen = [chunks[k] for k in rng.choice(len(chunks), 100, replace=False)]
    for shard, i in chosen:
        raw = bytearray(shard.read_bytes())
        offset, nbytes = index_of(raw, N_PER_SHARD)[i]
        bit = int(rng.integers(0, 8 * (int(nbytes) - 4)))  # in the chunk's data, not its checksum
        raw[int(offset) + bit // 8] ^= 1 << (bit % 8)
        shard.write_bytes(bytes(raw))
    report = cubeslab.verify(path)
    assert not report["ok"]
    named = {b["chunk"] for b in report["arrays"]["."]["bad"]}
    expected = {f"{shard.relative_to(path).as_posix()} (inner chunk {i})" for shard, i in chosen}
    assert named == expected
    # A read of one of them fails naming the array and the chunk.
    shard, i = chosen[0]
    key = f"{shard.relative_to(path).as_posix()} (inner chunk {i})"
    corner = [int(s) * side for s, side in zip(shard.relative_to(path / "c").parts, SHARDS, strict=True)]
    within = np.unravel_index(i, (4, 2, 4))
    start = [c + w * s for c, w, s in zip(corner, within, CHUNKS, strict=True)]
    window = tuple(slice(a, a + s) for a, s in zip(start, CHUNKS, strict=True))
    with pytest.raises(cubeslab.CorruptDataError) as error:
        cubeslab.Array(path)[window]
    assert key in str(error.value) and str(path) in str(error.value)


@pytest.mark.parametrize("threads", [1, 2])
def test_chunks_checked_in_groups_ahead_of_the_copy_are_all_checked_and_copied(tmp_path, threads):
    """A worker checks up to 512 KiB of raw chunks before it copies from them. Here 8 MiB in 256-byte
    chunks: on two threads each of the 8 runs of chunks holds two groups, so group boundaries fall
    inside the reads below. Every value must arrive, and a flip in the last chunk read is caught."""
    data = np.random.default_rng(3).standard_normal((2048, 1024)).astype(np.float32)
    path = tmp_path / "small.zarr"
    cubeslab.Array.from_numpy(path, data, chunks=(8, 8), shards=(256, 256))
    array = cubeslab.Array(path)
    for key in [(slice(None), slice(None)), (slice(3, 1021, 3), slice(None, None, 2)), (slice(None), 517)]:
        np.testing.assert_array_equal(array.read(key, threads=threads), data[key])
    shard = path / "c" / "7" / "3"
    raw = bytearray(shard.read_bytes())
    offset, nbytes = index_of(raw, 32 * 32)[-1]  # the chunk read last
    raw[int(offset) + int(nbytes) // 2] ^= 0x10
    shard.write_bytes(bytes(raw))
    with pytest.raises(cubeslab.CorruptDataError) as error:
        cubeslab.Array(path).read((slice(None), slice(None)), threads=threads)
    assert "c/7/3 (inner chunk 1023)" in str(error.value)


# -- C2 --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 3, 17, 600, 5000])
def test_a_shard_cut_short_by_any_amount_is_an_error(tmp_path, cut):
    path, _ = store_of(tmp_path)
    shard = shard_files(path)[0]
    shard.write_bytes(shard.read_bytes()[:-cut])
    with pytest.raises(cubeslab.CorruptDataError, match=r"c/0/0/0"):
        cubeslab.Array(path)[0:16, 0:16, 0:32]
    report = cubeslab.verify(path)
    assert not report["ok"] and report["arrays"]["."]["bad"]


def test_a_zero_filled_shard_is_an_error(tmp_path):
    path, _ = store_of(tmp_path, "zstd:1")
    shard = shard_files(path)[3]
    shard.write_bytes(bytes(shard.stat().st_size))
    before = peak_rss_mib()
    report = cubeslab.verify(path)
    assert not report["ok"]
    assert any(shard.relative_to(path).as_posix() in b["chunk"] for b in report["arrays"]["."]["bad"])
    assert peak_rss_mib() - before < 200


@pytest.mark.parametrize("claim", [2**64 - 2, 2**40], ids=["nbytes-2^64-2", "nbytes-1TiB"])
def test_an_index_claiming_impossible_sizes_is_an_error_without_allocating_them(tmp_path, claim):
    path, _ = store_of(tmp_path)
    shard = shard_files(path)[1]
    raw = bytearray(shard.read_bytes())
    index = bytearray(raw[-(N_PER_SHARD * 16 + 4) : -4])
    index[5 * 16 + 8 : 5 * 16 + 16] = claim.to_bytes(8, "little")
    raw[-(N_PER_SHARD * 16 + 4) : -4] = index
    raw[-4:] = crc32c(bytes(index)).to_bytes(4, "little")  # a forged, self-consistent index
    shard.write_bytes(bytes(raw))
    before = peak_rss_mib()
    with pytest.raises(cubeslab.CorruptDataError, match=r"index entry 5 points at bytes"):
        cubeslab.Array(path)[...]
    assert peak_rss_mib() - before < 200


def forge_index(shard, change) -> None:
    """Edit a shard's index with ``change(index)`` and give it a matching checksum."""
    raw = bytearray(shard.read_bytes())
    index = index_of(bytes(raw), N_PER_SHARD).copy()
    change(index)
    table = index.astype("<u8").tobytes()
    raw[-(N_PER_SHARD * 16 + 4) :] = table + crc32c(table).to_bytes(4, "little")
    shard.write_bytes(bytes(raw))


def test_index_entries_sharing_bytes_are_an_error_not_another_chunks_values(tmp_path):
    # Two entries at the same bytes would each pass their checksum: chunk 3 would read as chunk 2.
    path, _ = store_of(tmp_path)
    shard = shard_files(path)[0]

    def alias(index):
        index[3] = index[2]

    forge_index(shard, alias)
    with pytest.raises(cubeslab.CorruptDataError, match=r"c/0/0/0.*index entries 2 and 3 share bytes"):
        cubeslab.Array(path)[0:4, 0:8, 0:8]
    assert not cubeslab.verify(path)["ok"]


def test_an_entry_pointing_into_the_index_is_an_error(tmp_path):
    path, _ = store_of(tmp_path)
    shard = shard_files(path)[0]
    size = shard.stat().st_size

    def into_index(index):
        index[N_PER_SHARD - 1] = (size - 40, 8)

    forge_index(shard, into_index)
    with pytest.raises(cubeslab.CorruptDataError, match=r"outside the chunk data"):
        cubeslab.Array(path)[0:4, 0:8, 0:8]


def test_shards_whose_chunks_are_listed_out_of_file_order_still_read(tmp_path):
    # The Zarr spec lets chunks lie in any order in a shard: only overlap is an error.
    import zarr

    data = np.arange(16 * 16 * 16, dtype=np.float32).reshape(16, 16, 16)
    z = zarr.create_array(tmp_path / "z.zarr", shape=data.shape, chunks=(4, 4, 4), shards=(16, 16, 16),
                          dtype="float32", compressors=None)  # fmt: skip
    z[...] = data
    shard = tmp_path / "z.zarr" / "c" / "0" / "0" / "0"
    meta = json.loads((tmp_path / "z.zarr" / "zarr.json").read_text())
    index_codecs = [c["name"] for c in meta["codecs"][0]["configuration"]["index_codecs"]]
    assert index_codecs == ["bytes", "crc32c"]  # zarr-python's default
    raw = shard.read_bytes()
    n = 64
    index = index_of(raw, n)
    order = np.argsort(index[:, 0])
    # Rewrite the chunks in reverse file order, keeping the index pointing at them.
    body, new = b"", index.copy()
    for i in order[::-1]:
        o, nb = index[i]
        new[i] = (len(body), nb)
        body += raw[int(o) : int(o + nb)]
    table = new.astype("<u8").tobytes()
    shard.write_bytes(body + table + crc32c(table).to_bytes(4, "little"))
    assert np.array_equal(cubeslab.Array(tmp_path / "z.zarr")[...], data)


# -- C3 --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        lambda m: {**m, "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16, 16]}}},
        lambda m: {**m, "data_type": "float64"},
        lambda m: {**m, "codecs": [{**m["codecs"][0], "configuration": {**m["codecs"][0]["configuration"],
                                                                         "chunk_shape": [5, 8, 8]}}]},
    ],
    ids=["chunk-shape-of-other-rank", "dtype-changed", "inner-chunks-not-dividing-shards"],
)  # fmt: skip
def test_metadata_that_does_not_fit_the_data_is_an_error_on_open_or_read(tmp_path, damage):
    path, _ = store_of(tmp_path)
    meta = path / "zarr.json"
    meta.write_text(json.dumps(damage(json.loads(meta.read_text()))))
    with pytest.raises(cubeslab.CubeslabError) as error:
        cubeslab.Array(path)[0:4, 0:8, 0:8]
    assert str(path) in str(error.value)


# -- C4 --------------------------------------------------------------------------------------------


def test_verify_checks_what_unverified_reads_skip(tmp_path):
    path, _ = store_of(tmp_path)
    shard = shard_files(path)[0]
    raw = bytearray(shard.read_bytes())
    raw[int(index_of(raw, N_PER_SHARD)[0, 0]) + 9] ^= 0x40
    shard.write_bytes(bytes(raw))
    # A reader that opted out of checksums gets the bytes as they are ...
    assert cubeslab.Array(path).read((slice(0, 4), slice(0, 8), slice(0, 8)), verify=False).shape == (4, 8, 8)
    # ... verify has no such option.
    report = cubeslab.verify(path)
    assert [b["chunk"] for b in report["arrays"]["."]["bad"]] == ["c/0/0/0 (inner chunk 0)"]


# -- C5 --------------------------------------------------------------------------------------------


def zstd_bomb(claimed: int) -> bytes:
    """A zstd frame whose header claims ``claimed`` bytes of content (single segment, 8-byte size),
    holding one raw block of 16 bytes."""
    header = (0xFD2FB528).to_bytes(4, "little") + bytes([0xE0]) + claimed.to_bytes(8, "little")
    block = (1 | (0 << 1) | (16 << 3)).to_bytes(3, "little") + bytes(16)
    return header + block


def plant(shard, n: int, i: int, payload: bytes) -> None:
    """Replace inner chunk ``i`` of a shard with ``payload`` + its crc32c, fixing the index."""
    raw = bytearray(shard.read_bytes())
    index = index_of(raw, n).copy()
    body = bytes(raw[: -(n * 16 + 4)])
    chunk = payload + crc32c(payload).to_bytes(4, "little")
    index[i] = (len(body), len(chunk))
    table = index.astype("<u8").tobytes()
    shard.write_bytes(body + chunk + table + crc32c(table).to_bytes(4, "little"))


@pytest.mark.parametrize("compress", ["zstd:3", "bitround:12"], ids=["engine-zstd", "zarrs-chain"])
def test_a_zstd_frame_claiming_a_terabyte_is_refused_with_bounded_memory(tmp_path, compress):
    path, _ = store_of(tmp_path, compress)
    shard = shard_files(path)[0]
    plant(shard, N_PER_SHARD, 0, zstd_bomb(2**40))
    before = peak_rss_mib()
    with pytest.raises(cubeslab.CorruptDataError, match=r"c/0/0/0 \(inner chunk 0\)"):
        cubeslab.Array(path)[0:4, 0:8, 0:8]
    assert peak_rss_mib() - before < 200


def test_an_unsharded_zstd_chunk_claiming_a_terabyte_is_refused(tmp_path):
    data = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    path = tmp_path / "u.zarr"
    cubeslab.Array.from_numpy(path, data, chunks=(32, 32), compress="zstd:1")
    chunk = path / "c" / "1" / "0"
    payload = zstd_bomb(2**40)
    chunk.write_bytes(payload + crc32c(payload).to_bytes(4, "little"))
    before = peak_rss_mib()
    with pytest.raises(cubeslab.CorruptDataError, match=r"c/1/0.*claims 1099511627776"):
        cubeslab.Array(path)[32:, :32]
    assert peak_rss_mib() - before < 200
    assert np.array_equal(cubeslab.Array(path)[:32], data[:32])  # the rest still reads
    assert os.path.getsize(chunk) < 100


# -- G9: a shard cut short while a reader has it mapped ---------------------------------------------

CUT_UNDER_READER = """
import os, sys
import cubeslab
from cubeslab.array import ReadSettings

path, shard, verify = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
array = cubeslab.Array(path, ReadSettings(verify=verify, threads=2))
array[...]  # every shard is mapped now, and held open by the handle
os.truncate(shard, os.path.getsize(shard) // 3)
for attempt in ("held", "again"):
    try:
        array[...]
    except cubeslab.CorruptDataError as error:
        print(attempt, "error:", error, flush=True)
    else:
        print(attempt, "no error", flush=True)
"""


@pytest.mark.parametrize("verify", [True, False], ids=["verified", "unverified"])
def test_a_shard_truncated_under_a_reader_is_an_error_not_sigbus(tmp_path, verify):
    """A reader was killed by SIGBUS when a mapped shard was truncated in place by another process."""
    import subprocess
    import sys

    path, _ = store_of(tmp_path)
    shard = shard_files(path)[5]
    key = str(shard.relative_to(path))
    run = subprocess.run(
        [sys.executable, "-c", CUT_UNDER_READER, str(path), str(shard), "1" if verify else "0"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, f"reader died ({run.returncode}): {run.stderr[-2000:]}"
    held, again = run.stdout.splitlines()
    assert held.startswith("held error:") and "cut short" in held and key in held, held
    assert again.startswith("again error:") and key in again, again
