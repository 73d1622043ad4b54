"""The Python-Rust boundary: every kind of engine error is raised as a class cubeslab.errors
defines, and an option the engine does not know is an error naming it, never silently ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cubeslab
from cubeslab import _engine, errors

SEGY = Path(__file__).resolve().parent / "data/segy/f3.sgy"


def test_every_kind_of_engine_error_is_raised_as_an_existing_class():
    classes = _engine.error_classes()
    assert len(classes) >= 10
    for name in classes:
        cls = getattr(errors, name, None)
        assert isinstance(cls, type) and issubclass(cls, errors.CubeslabError), name
        assert name in errors.__all__, name


@pytest.mark.parametrize(
    "call",
    [
        lambda tmp: _engine.Ingest(str(SEGY), str(tmp / "s.zarr"), json.dumps({"layot": "cube:16"})),
        lambda tmp: _engine.segy_info(str(SEGY), json.dumps({"inline_bytes": 189})),
        lambda tmp: _engine.plan_layout([10, 10, 10], "float32", json.dumps({"acess": "inline"})),
        lambda tmp: _engine.ZarrArray.create(
            str(tmp / "a.zarr"),
            json.dumps({"shape": [4], "dtype": "float32", "chunk_shape": [4], "chunk": 1}),
        ),
    ],
    ids=["ingest", "segy-info", "plan", "create"],
)
def test_a_misspelled_option_is_an_error_naming_it(tmp_path, call):
    misspelled = r"unknown option '(layot|inline_bytes|acess|chunk)'"
    with pytest.raises(cubeslab.InvalidInputError, match=misspelled):
        call(tmp_path)


def test_a_value_the_binding_cannot_convert_is_an_invalid_input_error_and_a_value_error(tmp_path):
    with pytest.raises(cubeslab.InvalidInputError, match="dtype") as info:
        _engine.plan_layout([10, 10, 10], "complex64", "{}")
    assert isinstance(info.value, ValueError)
