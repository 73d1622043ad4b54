"""The compression benchmark runs end to end at a tiny size, so its code cannot rot: every setting is
measured, peers are measured or listed as skipped with a reason, and the report is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "compress.py"


def test_compress_benchmark_runs_at_tiny_size(tmp_path):
    done = subprocess.run(
        [sys.executable, str(BENCH), "--size", "tiny", "--runs", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((tmp_path / "compress.json").read_text())
    generated = results["volumes"][1]
    settings = {r["setting"] for r in generated["results"] if r["tool"] == "cubeslab"}
    assert {"none", "zstd:3", "zfp:snr=40", "zfp:rate=4"} <= settings
    for r in generated["results"]:
        assert "skipped" in r or (r["store_ratio"] > 0 and r["planes"]["inline"]["cold"]["runs"] == 1)
        if r["tool"] == "cubeslab" and r["setting"] == "none":
            assert r["snr_db"] is None and r["max_abs_error"] == 0  # exact (infinite SNR is null in JSON)
    assert {"zfp_decode_min_MBps_per_core", "zfp40_slowest_warm_over_none"} <= set(generated["verdicts"])
    assert (tmp_path / "compress.png").read_bytes()[:4] == b"\x89PNG"
    assert "| seismic-zfp |" in (tmp_path / "compress.md").read_text()
