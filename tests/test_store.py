"""Store integrity: damaged shards and metadata give typed errors naming the chunk, never numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import cubeslab

SHAPE, CHUNKS, SHARDS = (20, 24, 40), (8, 8, 8), (16, 16, 16)


@pytest.fixture
def stored(tmp_path):
    data = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    path = tmp_path / "a.zarr"
    cubeslab.Array.from_numpy(path, data, chunks=CHUNKS, shards=SHARDS)
    return path, data


def first_chunk_offset(shard: bytes, n_chunks: int) -> int:
    index = np.frombuffer(shard[-(n_chunks * 16 + 4) : -4], dtype="<u8").reshape(n_chunks, 2)
    return int(index[0, 0])


def flip_bit_in_first_chunk(shard, byte: int, mask: int) -> None:
    raw = bytearray(shard.read_bytes())
    raw[first_chunk_offset(raw, 8) + byte] ^= mask
    shard.write_bytes(bytes(raw))


def test_a_flipped_bit_in_a_chunk_is_reported_with_its_key(stored):
    path, _ = stored
    flip_bit_in_first_chunk(path / "c" / "0" / "0" / "0", 100, 0x10)
    array = cubeslab.Array(path)
    with pytest.raises(cubeslab.CorruptDataError, match=r"checksum mismatch .*c/0/0/0 \(inner chunk 0\)"):
        array[0:4, 0:4, 0:4]
    # Chunks the flip did not touch still read.
    assert np.array_equal(array[:, :, 20:], stored[1][:, :, 20:])


def test_a_damaged_shard_index_is_reported(stored):
    path, _ = stored
    shard = path / "c" / "0" / "1" / "0"
    raw = bytearray(shard.read_bytes())
    raw[-10] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(cubeslab.CorruptDataError, match=r"shard index of chunk 'c/0/1/0'"):
        cubeslab.Array(path)[0, 20, 0]


def test_a_truncated_shard_is_reported_not_read_past(stored):
    path, _ = stored
    shard = path / "c" / "1" / "0" / "1"
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(cubeslab.CorruptDataError, match=r"c/1/0/1.*shorter than its .*index"):
        cubeslab.Array(path)[19, 0, 20]


def crc32c(data: bytes) -> int:
    """Castagnoli CRC, bitwise (independent of the engine's implementation)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c_oracle_matches_the_standard_check_value():
    assert crc32c(b"123456789") == 0xE3069283


def test_an_index_pointing_past_the_end_is_reported_without_a_huge_allocation(stored):
    path, _ = stored
    shard = path / "c" / "0" / "0" / "1"
    raw = bytearray(shard.read_bytes())
    n = 8
    index = bytearray(raw[-(n * 16 + 4) : -4])
    index[8:16] = (2**64 - 2).to_bytes(8, "little")  # nbytes of chunk 0
    raw[-(n * 16 + 4) : -4] = index
    raw[-4:] = crc32c(bytes(index)).to_bytes(4, "little")
    shard.write_bytes(bytes(raw))
    with pytest.raises(cubeslab.CorruptDataError, match=r"c/0/0/1.*index entry 0 points at bytes"):
        cubeslab.Array(path)[0, 0, 20]


def test_a_missing_shard_reads_as_the_fill_value(stored):
    path, data = stored
    (path / "c" / "1" / "1" / "2").unlink()
    array = cubeslab.Array(path)
    got = array[...]
    assert np.isnan(got[16:, 16:, 32:]).all()
    assert np.array_equal(got[:16], data[:16])


@pytest.mark.parametrize(
    "damage",
    [
        lambda meta: "{not json",
        lambda meta: json.dumps({**meta, "data_type": "complex256"}),
        lambda meta: json.dumps({**meta, "shape": [-3, 4, 5]}),
        lambda meta: json.dumps({**meta, "codecs": [{"name": "no_such_codec"}]}),
        lambda meta: json.dumps({**meta, "node_type": "group"}),
    ],
    ids=["invalid-json", "unknown-dtype", "negative-shape", "unknown-codec", "wrong-node-type"],
)
def test_damaged_metadata_fails_to_open_with_the_file_named(stored, damage):
    path, _ = stored
    meta_file = path / "zarr.json"
    meta_file.write_text(damage(json.loads(meta_file.read_text())))
    with pytest.raises(cubeslab.CubeslabError, match=r"zarr\.json|unsupported") as info:
        cubeslab.Array(path)
    assert isinstance(info.value, ValueError)
    assert str(path) in str(info.value)


def test_verify_off_skips_the_checksum_but_verify_on_catches_it(stored):
    path, data = stored
    flip_bit_in_first_chunk(path / "c" / "0" / "0" / "0", 4, 0x01)
    with pytest.raises(cubeslab.CorruptDataError):
        cubeslab.Array(path).read((0,), verify=True)
    unverified = cubeslab.Array(path).read((0,), verify=False)
    assert unverified.shape == data[0].shape


def test_a_survey_whose_coordinates_do_not_match_its_amplitudes_is_refused(tmp_path):
    survey = tmp_path / "f3.zarr"
    cubeslab.ingest(Path(__file__).resolve().parent / "data/segy/f3.sgy", survey)
    meta_file = survey / "amplitude" / "zarr.json"
    meta = json.loads(meta_file.read_text())
    meta["shape"][0] += 5
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(
        cubeslab.InvalidInputError, match=r"inline.*coordinate array has shape \(23,\).*28 inline"
    ):
        cubeslab.open(survey)


def test_zero_dimensional_arrays_read_their_one_element(tmp_path):
    import zarr

    zarr.create_array(tmp_path / "scalar.zarr", shape=(), dtype="int16", fill_value=7)
    written = zarr.create_array(tmp_path / "written.zarr", shape=(), dtype="float64")
    written[...] = 2.5
    assert cubeslab.Array(tmp_path / "scalar.zarr")[...] == 7
    assert cubeslab.Array(tmp_path / "written.zarr")[()] == 2.5
    survey = tmp_path / "f3.zarr"
    cubeslab.ingest(Path(__file__).resolve().parent / "data/segy/f3.sgy", survey)
    assert cubeslab.Array(survey / "segy_file_header")[...].shape == ()
