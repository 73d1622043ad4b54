"""Reading a survey from S3-compatible object storage: a float32 survey ingested by cubeslab to a local
S3 server (tools/s3-server, started here over bench/data/s3), then the three middle planes read by
cubeslab, by zarr-python through obstore and by TensorStore's S3 driver, beside plain ranged GETs of
the bytes the plane needs (every touched shard's index and inner chunks, 64 requests in flight, through
obstore) made two ways: one request per range, and ranges less than 1 MiB apart merged into requests
of at most 4 MiB. The bound: the plane's bytes at the server's bandwidth, measured by fetching the
touched shards whole in ranged GETs of 4 MiB and of 256 KiB (the faster counts), 64 in flight. A second
store has a view per plane (`--views inline,crossline,time`); its planes are read routed to their views.

Cold: the store opened afresh (no shard index fetched yet; the opening timed on its own), then the
server's files evicted from the page cache (posix_fadvise DONTNEED) and the plane read. Warm: the
server's files cached, the store open, the plane read before (its shard indexes kept). Medians of
``--runs`` runs. The ingest's time (local staging, then the upload) is set beside a plain upload of
the staged files. Every read is checked equal to the local store's. Then the ingest on a Dask cluster of
one and two worker processes beside one process (``cubeslab_bench/cluster_ingest.py``).

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

from cubeslab_bench import cluster_ingest
from cubeslab_bench.measure import evict, files_under, settle, stats, timed
from cubeslab_bench.s3_server import S3Server, free_port

ROOT = Path(__file__).resolve().parent
SIZES = {"full": (400, 500, 750), "small": (150, 200, 300)}
"""Inlines, crosslines, samples: full is 600 MB of float32."""
TARGET = 0.8
VIEWS = ["inline", "crossline", "time"]
"""The views of the second store: one per plane read."""
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


def touched_ranges(local: Path, key, array_name: str = "amplitude") -> list[tuple[str, int, int]]:
    """(object key, start, end) of every shard index and inner chunk a plane reads from the array
    ``array_name``, from the local copy of the store (the same bytes as on the server)."""
    import cubeslab

    array = cubeslab.Array(local / array_name)
    shards, inner = np.array(array.shards), np.array(array.chunks)
    per_shard = shards // inner
    index_bytes = int(np.prod(per_shard)) * 16 + 4
    lo = [k if isinstance(k, int) else 0 for k in key]
    hi = [k + 1 if isinstance(k, int) else n for k, n in zip(key, array.shape, strict=True)]
    ranges = []
    first, last = np.array(lo) // shards, (np.array(hi) - 1) // shards
    for s in np.ndindex(*(last - first + 1)):
        s = first + np.array(s)
        name = f"{array_name}/c/" + "/".join(map(str, s))
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


def merged(ranges, gap: int = 1 << 20, piece: int = 4 << 20) -> list[tuple[str, int, int]]:
    """The ranges of each object merged where less than ``gap`` apart, then cut into pieces of at most
    ``piece`` bytes (so that large spans are fetched in parallel too): the fewest requests that fetch the
    bytes, as a client that knows them all at once would make."""
    out: list[tuple[str, int, int]] = []
    for name in sorted({r[0] for r in ranges}):
        spans: list[list[int]] = []
        for _, start, end in sorted(r for r in ranges if r[0] == name):
            if spans and start - spans[-1][1] < gap:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        out += [(name, a, min(a + piece, end)) for start, end in spans for a in range(start, end, piece)]
    return out


CLIENTS: dict[tuple[str, str], object] = {}
"""obstore clients by endpoint and prefix, each made once: a plain client's time is its requests', not
its setting up."""


def s3_store(server: S3Server, prefix: str = ""):
    from obstore.store import S3Store

    if (server.endpoint, prefix) in CLIENTS:
        return CLIENTS[server.endpoint, prefix]
    env = server.env()
    CLIENTS[server.endpoint, prefix] = S3Store(
        BUCKET, prefix=prefix, endpoint=server.endpoint, access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
        client_options={"allow_http": True},
    )  # fmt: skip
    return CLIENTS[server.endpoint, prefix]


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

    def tensorstore_reader():
        import tensorstore as ts

        kvstore = {
            "driver": "s3", "bucket": BUCKET, "path": f"{prefix}/amplitude/", "endpoint": server.endpoint,
            "aws_region": "us-east-1", "aws_credentials": {"type": "environment"},
        }  # fmt: skip
        array = ts.open({"driver": "zarr3", "kvstore": kvstore}, read=True).result()
        return lambda: array[key].read().result()

    return {
        "cubeslab": cubeslab_reader,
        "zarr-python+obstore": zarr_reader,
        "TensorStore": tensorstore_reader,
    }


def plain_fetches(server: S3Server, local: Path, prefix: str, exact, runs: int) -> dict:
    """The plain clients fetching a plane's ranges ``exact`` (one request per range, and merged), and
    the server's bandwidth fetching the shards they touch whole: a row of the table but the readers."""
    server_files = files_under(server.root / BUCKET)
    row: dict = {"bytes": sum(e - s for _, s, e in exact), "requests": len(exact)}

    def cold_and_warm(fetch) -> tuple[list[float], list[float]]:
        cold, warm = [], []
        for _ in range(runs):
            evict(server_files)
            cold.append(timed(fetch))
        for _ in range(runs):
            warm.append(timed(fetch))
        return cold, warm

    for name, ranges in (("plain GETs, one per range", exact), ("plain GETs, merged", merged(exact))):
        cold, warm = cold_and_warm(partial(plain_gets, server, prefix, ranges))
        row[name] = {"cold": stats(cold), "warm": stats(warm), "requests": len(ranges)}
    # The server's bandwidth: the touched shards fetched whole, 64 requests in flight, in pieces of
    # 4 MiB and of 256 KiB (one response streams slower than many: small objects need small pieces);
    # the faster counts.
    whole = [(name, 0, (local / name).stat().st_size) for name in sorted({r[0] for r in exact})]
    fetched = sum(e - s for _, s, e in whole)
    best = {"cold": 0.0, "warm": 0.0}
    for piece in (4 << 20, 256 << 10):
        cold, warm = cold_and_warm(partial(plain_gets, server, prefix, merged(whole, piece=piece)))
        for state, times in (("cold", cold), ("warm", warm)):
            best[state] = max(best[state], fetched / stats(times)["median_s"])
    row["server"] = {"bytes": fetched, "cold_Bps": best["cold"], "warm_Bps": best["warm"]}
    return row


def reader_times(server: S3Server, open_reader, expected, runs: int) -> dict:
    """Opening, cold and warm read times of the reader ``open_reader()`` returns; its result checked."""
    server_files = files_under(server.root / BUCKET)
    cold, opening = [], []
    for _ in range(runs):
        evict(server_files)
        started = time.perf_counter()
        read = open_reader()
        opening.append(time.perf_counter() - started)
        evict(server_files)
        started = time.perf_counter()
        got = read()
        cold.append(time.perf_counter() - started)
    np.testing.assert_array_equal(got, expected)
    read = open_reader()
    read()
    return {"open": stats(opening), "cold": stats(cold), "warm": stats([timed(read) for _ in range(runs)])}


def measure(server: S3Server, local: Path, url: str, prefix: str, runs: int) -> dict:
    import cubeslab

    expected_cube = cubeslab.open(local).amplitude
    results: dict = {}
    for plane, key in planes(expected_cube.shape).items():
        expected = expected_cube[key]
        row = plain_fetches(server, local, prefix, touched_ranges(local, key), runs)
        for tool, open_reader in readers(server, url, prefix, key).items():
            row[tool] = reader_times(server, open_reader, expected, runs)
        results[plane] = row
    return results


def measure_views(server: S3Server, local: Path, url: str, prefix: str, runs: int) -> dict:
    """The planes of a store ingested with a view for each, each read routed to its view."""
    import cubeslab

    expected_cube = cubeslab.open(local).amplitude
    routed = cubeslab.open(url).amplitude
    results: dict = {}
    for plane, key in planes(expected_cube.shape).items():
        name = Path(routed.source_for(key)).name
        row = plain_fetches(server, local, prefix, touched_ranges(local, key, name), runs)
        row["array"] = name

        def cubeslab_reader(key=key):
            array = cubeslab.open(url).amplitude
            return lambda: array[key]

        row["cubeslab"] = reader_times(server, cubeslab_reader, expected_cube[key], runs)
        results[plane] = row
    return results


def timings(row: dict, state: str) -> tuple[float, float, float]:
    """Seconds of a plane's read in ``state``: the bound (its bytes at the server's bandwidth), cubeslab's,
    and the plain client's making one request per range."""
    bound = row["bytes"] / row["server"][f"{state}_Bps"]
    return bound, row["cubeslab"][state]["median_s"], row["plain GETs, one per range"][state]["median_s"]


def views_table(report: dict, default_share: dict) -> list[str]:
    """The store with a view per plane: each plane read from its view, beside its bound."""
    v, r = report["views"], report["results"]
    lines = [
        "",
        f"## With a view per plane (`ingest --views {','.join(VIEWS)}`), each read routed to its view",
        "",
        "| plane | read from | bytes | ranges | state | bound | plain, one per range | cubeslab | "
        "share of the bound | default layout's share | faster than the default layout |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    share = {}
    for plane, row in v.items():
        for state in ("cold", "warm"):
            bound, ours, one = timings(row, state)
            share[plane, state] = bound / ours
            default = r[plane]["cubeslab"][state]["median_s"] if plane in r else float("nan")
            lines.append(
                f"| {plane} | {row['array']} | {row['bytes']:,} | {row['requests']} | {state} | "
                f"{bound * 1e3:.1f} | {one * 1e3:.1f} | {ours * 1e3:.1f} | {share[plane, state]:.0%} | "
                f"{default_share.get((plane, state), float('nan')):.0%} | {default / ours:.1f}x |"
            )
    slowest = max(v, key=lambda p: v[p]["cubeslab"]["cold"]["median_s"])
    met = share[slowest, "cold"] >= TARGET
    lines += [
        "",
        f"Slowest plane cold with views ({slowest}): {share[slowest, 'cold']:.0%} of the server's bandwidth "
        f"for its bytes (target {TARGET:.0%}: {'met' if met else 'not met'}).",
        "",
    ]
    return lines


def table(report: dict) -> str:
    r = report["results"]
    lines = [
        "# Object storage: plane reads from a local S3 server",
        "",
        f"{report['shape']} float32 survey, layout {report['layout']}, on a local S3 server (s3s-fs "
        "backend, tools/s3-server) over localhost; "
        f"{report['runs']} runs, medians in ms (cold: store just opened, no shard index fetched, server "
        "files evicted; warm: cached and open). Bound: the plane's bytes (its chunks and shard indexes) at "
        "the server's bandwidth, measured in the same run by fetching the touched shards whole with plain "
        "ranged GETs (4 MiB or 256 KiB pieces, the faster; 64 in flight). Two plain clients beside it: "
        "one request per range, and neighbours less than 1 MiB apart merged (gaps fetched too), 64 in "
        "flight.",
        "",
        "| plane | bytes | ranges | state | bound | plain, one per range | plain, merged | cubeslab | "
        "zarr-python+obstore | TensorStore | cubeslab share of the bound | best plain client / cubeslab |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    share, beside_plain = {}, {}
    for plane, row in r.items():
        for state in ("cold", "warm"):
            bound, ours, one = timings(row, state)
            share[plane, state] = bound / ours
            merged_s = row["plain GETs, merged"][state]["median_s"]
            requests = row["plain GETs, merged"]["requests"]
            beside_plain[plane, state] = min(one, merged_s) / ours
            lines.append(
                f"| {plane} | {row['bytes']:,} | {row['requests']} | {state} | {bound * 1e3:.1f} | "
                f"{one * 1e3:.1f} | {merged_s * 1e3:.1f} ({requests} requests) | "
                f"{ours * 1e3:.1f} | {row['zarr-python+obstore'][state]['median_s'] * 1e3:.1f} | "
                f"{row['TensorStore'][state]['median_s'] * 1e3:.1f} | "
                f"{share[plane, state]:.0%} | {beside_plain[plane, state]:.0%} |"
            )
    bandwidth = ", ".join(f"{p} {r[p]['server']['cold_Bps'] / 1e6:,.0f}" for p in r)
    opening = {
        t: r["inline"][t]["open"]["median_s"] for t in ("cubeslab", "zarr-python+obstore", "TensorStore")
    }
    slowest = max(r, key=lambda p: r[p]["cubeslab"]["cold"]["median_s"])
    met = share[slowest, "cold"] >= TARGET
    ingest = report["ingest"]
    lines += [
        "",
        f"Server bandwidth, cold (MB/s, by the shards each plane touches): {bandwidth}.",
        "",
        "Opening the store (metadata and the coordinate arrays for cubeslab; the group and array for "
        "zarr-python; the array for TensorStore), files evicted: "
        f"cubeslab {opening['cubeslab'] * 1e3:.1f} ms, "
        f"zarr-python+obstore {opening['zarr-python+obstore'] * 1e3:.1f} ms, TensorStore "
        f"{opening['TensorStore'] * 1e3:.1f} ms.",
        "",
        f"Slowest plane cold ({slowest}): {share[slowest, 'cold']:.0%} of the server's bandwidth for its "
        f"bytes, fetched as whole shards in plain ranged GETs (target {TARGET:.0%}: "
        f"{'met' if met else 'not met'}); "
        f"{beside_plain[slowest, 'cold']:.0%} of the speed of the best plain client fetching the same byte "
        f"ranges at 64 in flight (worst plane cold: {min(beside_plain[p, 'cold'] for p in r):.0%}).",
        "",
        f"Ingest to S3: {ingest['seconds']:.2f} s for {ingest['source_bytes'] / 1e6:,.0f} MB of SEG-Y "
        f"({ingest['source_bytes'] / ingest['seconds'] / 1e6:,.0f} MB/s); the same ingest to a local folder "
        f"{ingest['local_seconds']:.2f} s.",
        "",
    ]
    if "views" in report:
        lines += views_table(report, share)
    if "cluster_ingest" in report:
        lines += cluster_ingest.table(report["cluster_ingest"])
    lines += ["", "Reproduce: `make bench-scale` (or `python bench/scale.py --size full`)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="full")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    args = parser.parse_args()
    import cubeslab
    from cubeslab import _engine

    shape = SIZES[args.size]
    source = survey(args.data / f"scale-{'x'.join(map(str, shape))}.sgy", shape)
    local = args.data / "scale-local.zarr"
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
        summary = cubeslab.ingest(source, url, overwrite=True)
        seconds = time.perf_counter() - started
        # The same store on this machine: where the plain GETs' byte ranges are read from.
        shutil.rmtree(local, ignore_errors=True)
        started = time.perf_counter()
        cubeslab.ingest(source, local, layout=summary["plan"]["layout"])
        local_seconds = time.perf_counter() - started
        # The same survey with a view for each plane; its local copy downloaded, byte for byte.
        views_prefix = "surveys/scale-views.zarr"
        views_url = f"s3://{BUCKET}/{views_prefix}"
        cubeslab.ingest(source, views_url, overwrite=True, views=VIEWS)
        local_views = args.data / "scale-views-local.zarr"
        shutil.rmtree(local_views, ignore_errors=True)
        _engine.download_store(views_url, local_views)
        settle()
        results = measure(server, local, url, prefix, args.runs)
        views = measure_views(server, local_views, views_url, views_prefix, args.runs)
    finally:
        server.stop()
    cluster = cluster_ingest.measure(source, args.data, min(args.runs, 3))
    report = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "shape": list(shape),
        "layout": summary["plan"]["layout"],
        "runs": args.runs,
        "ingest": {"seconds": seconds, "local_seconds": local_seconds, "source_bytes": source.stat().st_size},
        "results": results,
        "views": views,
        "cluster_ingest": cluster,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(report, indent=1))
    (args.out / "scale.md").write_text(table(report))
    print(table(report))


if __name__ == "__main__":
    main()
