"""The viewer's speed in a real headless Chromium, on the 600 x 800 x 1000 benchmark survey (generated
once, ingested with the default layout): a slider moved one step at a time to planes not seen before
(store files in the page cache: warm), timed from the input event to the new plane drawn and a frame
painted; the first view of the store, its files evicted (cold), from navigation to all three planes
painted. The server's share is what it spent reading each plane (its Server-Timing header, reported by
the browser's Resource Timing); the browser's share is the rest (transfer, colour mapping, drawing).
Then 50 clients stepping through planes for 30 s on localhost: errors, latency and the server's memory.

Usage: python bench/viewer.py [--steps 60] [--out bench/results]   (Writes OUT/viewer.json, OUT/viewer.md.)
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

from cubeslab_bench.measure import evict, files_under
from cubeslab_bench.seismic import survey
from cubeslab_bench.viewer_server import viewer_server

ROOT = Path(__file__).resolve().parent
SHAPE = (600, 800, 1000)
TARGETS = {"step_p95_ms": 100.0, "first_view_s": 1.0}

STEP = """async ([view, value]) => {
  const v = window.viewer.views[view];
  const before = window.viewer.drawn();
  performance.clearResourceTimings();
  const t0 = performance.now();
  v.slider.value = String(value);
  v.slider.dispatchEvent(new Event('input'));
  while (!(window.viewer.drawn() > before && v.canvas.dataset.index === String(value))) {
    await new Promise((r) => setTimeout(r, 0));
  }
  await new Promise((r) => requestAnimationFrame(() => r()));
  const total = performance.now() - t0;
  const entries = performance.getEntriesByType('resource').filter((e) => e.name.includes('/plane?'));
  const last = entries[entries.length - 1];
  const server = last.serverTiming.length ? last.serverTiming[0].duration : NaN;
  return [total, server];
}"""


def ingested(data: Path) -> Path:
    import cubeslab

    source = survey(data, SHAPE)
    store = data / "viewer-600x800x1000.zarr"
    if not (store / "zarr.json").exists():
        cubeslab.ingest(source, store, overwrite=True)
    return store


def percentiles(values: list[float]) -> dict:
    a = np.array(values)
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)), "max": float(a.max())}


def in_chromium(store: Path, steps: int) -> dict:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    results: dict = {}
    # First view, cold: a new server (no plane cached) and the store's files evicted.
    with sync_playwright() as playwright, viewer_server([store]) as (_, base):
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        evict(files_under(store))
        page = browser.new_page(viewport={"width": 1600, "height": 640})
        started = time.perf_counter()
        page.goto(f"{base}/")
        page.evaluate("window.viewer.ready.then(() => new Promise((r) => requestAnimationFrame(() => r())))")
        first = time.perf_counter() - started
        read = page.evaluate(
            "performance.getEntriesByType('resource').filter((e) => e.name.includes('/plane?'))"
            ".map((e) => e.serverTiming.length ? e.serverTiming[0].duration : 0)"
        )
        results["first_view"] = {"seconds": first, "server_read_ms": read}
        # Warm: the store's files read once, then each step a plane not seen before.
        for path in files_under(store):
            path.read_bytes()
        for view, axis_name in enumerate(("inline", "crossline", "time")):
            start = page.evaluate("(v) => window.viewer.state.pos[v]", view)
            totals, servers = [], []
            for n in range(steps):
                value = (start + 1 + n) % SHAPE[view]
                total, server_ms = page.evaluate(STEP, [view, value])
                totals.append(total)
                servers.append(server_ms)
            results[axis_name] = {
                "step_ms": percentiles(totals),
                "server_ms": percentiles(servers),
                "browser_ms": percentiles([t - s for t, s in zip(totals, servers, strict=True)]),
            }
        page.screenshot(path=ROOT / "results" / "viewer.png")
        browser.close()
    return results


def load_test(store: Path, clients: int = 50, seconds: float = 30.0) -> dict:
    """``clients`` threads stepping through inlines for ``seconds`` against a real server."""
    with viewer_server([store]) as (server, base):
        return load(server, base, clients, seconds)


def load(server, base: str, clients: int, seconds: float) -> dict:
    with urllib.request.urlopen(f"{base}/api/stores") as listed:
        store_id = json.loads(listed.read())[0]["id"]
    latencies: list[float] = []
    failures: list[str] = []
    peak = [0]
    stop = time.monotonic() + seconds

    def client(n: int) -> None:
        index = n * 7
        while time.monotonic() < stop:
            index = (index + 1) % SHAPE[0]
            url = f"{base}/api/stores/{store_id}/plane?axis=0&index={index}&h=360&w=480"
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    response.read()
                latencies.append(time.perf_counter() - t0)
            except Exception as error:  # every failure is counted
                failures.append(repr(error))

    def watch() -> None:
        # Anonymous memory: the engine maps the store's files, whose cached pages RSS would count too.
        status = Path(f"/proc/{server.pid}/status")
        while time.monotonic() < stop:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            peak[0] = max(peak[0], int(fields["RssAnon"].split()[0]) * 1024)
            time.sleep(0.2)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    threads.append(threading.Thread(target=watch))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": len(latencies),
        "errors": len(failures),
        "first_errors": failures[:3],
        "latency_ms": percentiles([s * 1e3 for s in latencies]) if latencies else None,
        "server_peak_anon_mb": peak[0] / 1e6,
    }


def table(report: dict) -> str:
    lines = [
        "# The viewer in headless Chromium",
        "",
        f"{report['shape']} float32 survey, default layout; canvases 480 x 360. Warm: the store's files in "
        "the page cache, each step a plane not shown before (no plane cached by the server). Step: from "
        "the slider's input event to the new plane drawn and a frame painted. Server: its read of the "
        "plane (Server-Timing); browser: the rest (transfer, colour mapping, drawing).",
        "",
        "| view | steps | step p50 ms | step p95 ms | server p50 / p95 ms | browser p50 / p95 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in ("inline", "crossline", "time"):
        row = report["chromium"][name]
        s, sv, b = row["step_ms"], row["server_ms"], row["browser_ms"]
        lines.append(
            f"| {name} | {report['steps']} | {s['p50']:.1f} | {s['p95']:.1f} | "
            f"{sv['p50']:.1f} / {sv['p95']:.1f} | {b['p50']:.1f} / {b['p95']:.1f} |"
        )
    worst = max(report["chromium"][n]["step_ms"]["p95"] for n in ("inline", "crossline", "time"))
    first = report["chromium"]["first_view"]
    first_met = first["seconds"] <= TARGETS["first_view_s"]
    load = report["load"]
    lines += [
        "",
        f"Slowest view's p95 step: {worst:.1f} ms (target {TARGETS['step_p95_ms']:.0f} ms: "
        f"{'met' if worst <= TARGETS['step_p95_ms'] else 'not met'}).",
        "",
        f"First view, cold (new server, store files evicted; navigation to three planes painted): "
        f"{first['seconds']:.2f} s, of which the server's plane reads "
        f"{', '.join(f'{ms:.0f}' for ms in first['server_read_ms'])} ms (in parallel) "
        f"(target {TARGETS['first_view_s']:.0f} s: {'met' if first_met else 'not met'}).",
        "",
        f"Load: {load['clients']} clients for {load['seconds']:.0f} s on localhost: "
        f"{load['requests']} planes, "
        f"{load['errors']} errors, latency p50 {load['latency_ms']['p50']:.0f} ms, p95 "
        f"{load['latency_ms']['p95']:.0f} ms; server's anonymous memory at most "
        f"{load['server_peak_anon_mb']:.0f} MB "
        "(the plane cache holds up to 256 MB).",
        "",
        "Reproduce: `make bench-viewer` (or `python bench/viewer.py`).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--load-seconds", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--data", type=Path, default=ROOT / "data")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.data.mkdir(parents=True, exist_ok=True)
    store = ingested(args.data)
    report = {
        "machine": {"cpus": __import__("os").cpu_count(), "platform": platform.platform()},
        "shape": list(SHAPE),
        "steps": args.steps,
        "chromium": in_chromium(store, args.steps),
        "load": load_test(store, seconds=args.load_seconds),
    }
    (args.out / "viewer.json").write_text(json.dumps(report, indent=1))
    (args.out / "viewer.md").write_text(table(report))
    print(table(report))


if __name__ == "__main__":
    main()
