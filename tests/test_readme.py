"""The README's Python examples run verbatim on the survey that ``make demo`` writes.

``make demo`` writes ``demo-data/synthetic-full.sgy`` (300 x 400 x 600). To stay fast, the test writes
the demo's *small* survey under that name instead: it numbers inlines, crosslines and samples as the
full one does and is smaller along every axis, so every label and position that exists in it exists in
the full survey too (asserted below), and an example that runs on it runs on the full one.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from cubeslab.demo import SIZES
from cubeslab.synthetic import SyntheticSurvey, write_segy
from cubeslab_bench.s3_server import S3Server, free_port

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DEMO_DIR = "demo-data"  # the Makefile's `cubeslab demo --dir demo-data`
DEMO_SGY = f"{DEMO_DIR}/synthetic-full.sgy"  # where run_demo writes the full survey in it


def python_blocks() -> list[tuple[int, str]]:
    """Every ```python block of the README, with the line it starts on."""
    text = README.read_text()
    return [
        (text.count("\n", 0, match.start(1)), match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    ]


def test_the_readme_has_a_python_example_on_the_demo_survey():
    blocks = python_blocks()
    assert blocks
    assert any(DEMO_SGY in code for _, code in blocks)
    assert f"demo --dir {DEMO_DIR}" in (REPO / "Makefile").read_text()


def test_the_small_survey_has_only_labels_the_full_one_has():
    small, full = SyntheticSurvey(*SIZES["small"]), SyntheticSurvey(*SIZES["full"])
    assert all(s <= f for s, f in zip(small.shape, full.shape, strict=True))
    assert np.isin(small.inlines, full.inlines).all()
    assert np.isin(small.crosslines, full.crosslines).all()
    assert small.dt_us == full.dt_us  # same sample times: 0, 4, ... ms (no delay written)


def test_readme_python_examples_run_one_after_another(tmp_path, monkeypatch):
    # As a reader pastes them: in one folder, in order, each block using what the ones above made.
    monkeypatch.chdir(tmp_path)
    (tmp_path / DEMO_DIR).mkdir()
    write_segy(tmp_path / DEMO_SGY, SyntheticSurvey(*SIZES["small"]))
    blocks = python_blocks()
    buckets = {m.group(1) for _, code in blocks for m in re.finditer(r"s3://([^/]+)/", code)}
    server = None
    if buckets:  # against a real S3 server, its buckets made and its address in the environment
        server = S3Server(tmp_path / "s3", free_port()).start()
        for bucket in buckets:
            server.bucket(bucket)
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
    try:
        for start, code in blocks:
            run_block(start, code)
    finally:
        if server is not None:
            server.stop()


def run_block(start: int, code: str) -> None:
    # padded so that a traceback names the README's own line numbers
    exec(compile("\n" * start + code, str(README), "exec"), {"__name__": "__readme__"})
