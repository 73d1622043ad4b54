"""Reading a survey from S3-compatible object storage: a float32 survey ingested by cubeslab to a local
s3s-fs server (started here, over bench/data/s3), then the three middle planes read by cubeslab and by
zarr-python through obstore, beside plain ranged GETs of exactly the bytes the plane needs (every touched
shard's index and inner chunks, one request each, 64 in flight, through obstore): the server's bandwidth
for that many bytes, the bound of any client.

Cold: the server's files evicted from the page cache (posix_fadvise DONTNEED) and the store opened
afresh before each run. Warm: the server's files cached, the store open, the plane read before. Medians
of ``--runs`` runs. The ingest's time (local staging, then the upload) is set beside a plain upload of
the staged files. Every read is checked equal to the local store's.

Usage: python bench/scale.py [--size small|full] [--runs 5] [--out bench/results]
Writes OUT/scale.json and OUT/scale.md.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import asyncio
import json
import platform
import shutil
import time
from functools import partial
from pathlib import Path

import numpy as np

from cubeslab_bench.measure import evict, files_under, settle, stats
from cubeslab_bench.s3_server import S3Server, free_port

ROOT = Path(__file__).resolve().parent
SIZES = {"full": (400, 500, 750), "small": (150, 200, 300)}
"""Inlines, crosslines, samples: full is 600 MB of float32."""
TARGET = 0.8
BUCKET = "bench"


def survey(path: Path, shape) -> Path:
    from cubeslab.synthetic import SyntheticSurvey, write_segy

    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_segy(path, SyntheticSurvey(*shape))
    return path


def planes(shape) -> dict[str, tuple]:
    return {
        "inline": (shape[0] // 2, slice(None), slice(None)),
        "crossline": (slice(None), shape[1] // 2, slice(None)),
        "time": (slice(None), slice(None), shape[2] // 2),
    }


def touched_ranges(local: Path, key) -> list[tuple[str, int, int]]:
    """(object key, start, end) of every shard index and inner chunk a plane reads, from the local copy
    of the store (the same bytes as on the server)."""
    import cubeslab

    array = cubeslab.open(local).amplitude
    shards, inner = np.array(array.shards), np.array(array.chunks)
    per_shard = shards // inner
    index_bytes = int(np.prod(per_shard)) * 16 + 4
    lo = [k if isinstance(k, int) else 0 for k in key]
    hi = [k + 1 if isinstance(k, int) else n for k, n in zip(key, array.shape, strict=True)]
    ranges = []
    first, last = np.array(lo) // shards, (np.array(hi) - 1) // shards
    for s in np.ndindex(*(last - first + 1)):
        s = first + np.array(s)
        name = "amplitude/c/" + "/".join(map(str, s))
        data = (local / name).read_bytes()
        size = len(data)
        ranges.append((name, size - index_bytes, size))
        index = np.frombuffer(data[size - index_bytes : size - 4], "<u8").reshape(-1, 2)
        c_lo = np.maximum(np.array(lo) - s * shards, 0) // inner
        c_hi = (np.minimum(np.array(hi) - s * shards, shards) - 1) // inner
        for c in np.ndindex(*(c_hi - c_lo + 1)):
            flat = int(np.ravel_multi_index(tuple(c_lo + np.array(c)), tuple(per_shard)))
            offset, nbytes = (int(v) for v in index[flat])
            if offset != 2**64 - 1:
                ranges.append((name, offset, offset + nbytes))
    return ranges


def s3_store(server: S3Server, prefix: str = ""):
    from obstore.store import S3Store

    env = server.env()
    return S3Store(
        BUCKET, prefix=prefix, endpoint=server.endpoint, access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
        client_options={"allow_http": True},
    )  # fmt: skip


def plain_gets(server: S3Server, prefix: str, ranges) -> None:
    import obstore

    store = s3_store(server, prefix)

    async def fetch() -> None:
        limit = asyncio.Semaphore(64)

        async def one(name: str, start: int, end: int) -> None:
            async with limit:
                await obstore.get_range_async(store, name, start=start, end=end)

        await asyncio.gather(*(one(*r) for r in ranges))

    asyncio.run(fetch())


def readers(server: S3Server, url: str, prefix: str, key):
    import zarr
    from zarr.storage import ObjectStore

    import cubeslab

    def cubeslab_reader():
        array = cubeslab.open(url).amplitude
        return lambda: array[key]

    def zarr_reader():
        array = zarr.open_group(ObjectStore(s3_store(server, prefix), read_only=True), mode="r")["amplitude"]
        return lambda: array[key]

    return {"cubeslab": cubeslab_reader, "zarr-python+obstore": zarr_reader}


def measure(server: S3Server, local: Path, url: str, prefix: str, runs: int) -> dict:
    import cubeslab

    expected_cube = cubeslab.open(local).amplitude
    server_files = files_under(server.root / BUCKET)
    results: dict = {}
    for plane, key in planes(expected_cube.shape).items():
        expected = expected_cube[key]
        ranges = touched_ranges(local, key)
        row: dict = {"bytes": sum(e - s for _, s, e in ranges), "requests": len(ranges)}
        cold, warm = [], []
        fetch = partial(plain_gets, server, prefix, ranges)
        for _ in range(runs):
            evict(server_files)
            cold.append(timed(fetch))
        for _ in range(runs):
            warm.append(timed(fetch))
        row["plain GETs"] = {"cold": stats(cold), "warm": stats(warm)}
        for tool, open_reader in readers(server, url, prefix, key).items():
            cold = []
            for _ in range(runs):
                evict(server_files)
                started = time.perf_counter()
                read = open_reader()
                got = read()
                cold.append(time.perf_counter() - started)
            np.testing.assert_array_equal(got, expected)
            read = open_reader()
            read()
            row[tool] = {"cold": stats(cold), "warm": stats([timed(read) for _ in range(runs)])}
        results[plane] = row
    return results


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def table(report: dict) -> str:
    r = report["results"]
    lines = [
        "# Object storage: plane reads from a local S3 server",
        "",
        f"{report['shape']} float32 survey, layout {report['layout']}, on s3s-fs over localhost; "
        f"{report['runs']} runs, medians in ms (cold: server files evicted, store opened afresh; warm: "
        "cached and open). Bound: plain ranged GETs of the same bytes, 64 in flight.",
        "",
        "| plane | bytes | requests | state | plain GETs (bound) | cubeslab | zarr-python+obstore | "
        "cubeslab share of the bound |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for plane, row in r.items():
        for state in ("cold", "warm"):
            bound = row["plain GETs"][state]["median"]
            ours = row["cubeslab"][state]["median"]
            lines.append(
                f"| {plane} | {row['bytes']:,} | {row['requests']} | {state} | {bound * 1e3:.1f} | "
                f"{ours * 1e3:.1f} | {row['zarr-python+obstore'][state]['median'] * 1e3:.1f} | "
                f"{bound / ours:.0%} |"
            )
    slowest = max(r, key=lambda p: r[p]["cubeslab"]["cold"]["median"])
    share = r[slowest]["plain GETs"]["cold"]["median"] / r[slowest]["cubeslab"]["cold"]["median"]
    ingest = report["ingest"]
    lines += [
        "",
        f"Slowest plane cold ({slowest}): {share:.0%} of the server's bandwidth for its bytes "
        f"(target {TARGET:.0%}: {'met' if share >= TARGET else 'not met'}).",
        "",
        f"Ingest to S3: {ingest['seconds']:.2f} s for {ingest['source_bytes'] / 1e6:,.0f} MB of SEG-Y "
        f"({ingest['source_bytes'] / ingest['seconds'] / 1e6:,.0f} MB/s); the same ingest to a local folder "
        f"{ingest['local_seconds']:.2f} s.",
        "",
        "Reproduce: `make bench-scale` (or `python bench/scale.py --size full`).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    args = parser.parse_args()
    import cubeslab

    shape = SIZES[args.size]
    source = survey(args.data / f"scale-{'x'.join(map(str, shape))}.sgy", shape)
    local = args.data / "scale-local.zarr"
    shutil.rmtree(local, ignore_errors=True)
    started = time.perf_counter()
    summary = cubeslab.ingest(source, local)
    local_seconds = time.perf_counter() - started
    server = S3Server(args.data / "s3", free_port())
    shutil.rmtree(server.root, ignore_errors=True)
    server.start()
    try:
        server.bucket(BUCKET)
        os.environ.update(server.env())
        prefix = "surveys/scale.zarr"
        url = f"s3://{BUCKET}/{prefix}"
        settle()
        started = time.perf_counter()
        cubeslab.ingest(source, url, overwrite=True)
        seconds = time.perf_counter() - started
        settle()
        results = measure(server, local, url, prefix, args.runs)
    finally:
        server.stop()
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "shape": list(shape),
        "layout": summary["plan"]["layout"],
        "runs": args.runs,
        "ingest": {"seconds": seconds, "local_seconds": local_seconds, "source_bytes": source.stat().st_size},
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(report, indent=1))
    (args.out / "scale.md").write_text(table(report))
    print(table(report))


if __name__ == "__main__":
    main()
