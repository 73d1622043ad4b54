"""The Python-Rust boundary: every kind of engine error is raised as a class cubeslab.errors
defines; an option the engine does not know is an error naming it, never silently ignored; the
typed option objects' fields, defaults and help are the ones the type stub, the Python API and
the command line show."""

from __future__ import annotations

import ast
import inspect
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
        lambda tmp: _engine.ZarrArray.create(
            str(tmp / "a.zarr"),
            json.dumps({"shape": [4], "dtype": "float32", "chunk_shape": [4], "chunk": 1}),
        ),
    ],
    ids=["create"],
)
def test_a_misspelled_option_is_an_error_naming_it(tmp_path, call):
    misspelled = r"unknown option 'chunk'"
    with pytest.raises(cubeslab.InvalidInputError, match=misspelled):
        call(tmp_path)


def test_a_value_the_binding_cannot_convert_is_an_invalid_input_error_and_a_value_error(tmp_path):
    with pytest.raises(cubeslab.InvalidInputError, match="dtype") as info:
        _engine.plan_layout([10, 10, 10], "complex64")
    assert isinstance(info.value, ValueError)


FIELDS = sorted(_engine.IngestOptions.help())
STUB = Path(cubeslab.__file__).parent / "_engine.pyi"


def test_a_misspelled_keyword_option_is_an_error_naming_it():
    with pytest.raises(TypeError, match="layot"):
        _engine.IngestOptions(layot="cube:16")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="inline_bytes"):
        cubeslab.ingest(SEGY, "unused.zarr", inline_bytes=189)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="acess"):
        _engine.plan_layout([10, 10, 10], "float32", acess="inline")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="profil"):
        _engine.CostModel([], profil="{}")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("endian", "middle", "endian must be auto, big or little"),
        ("layout", "cube:x", "layout"),
        ("compress", "zstd:fast", "zstd"),
        ("dtype", "complex64", "unsupported dtype"),
        ("profile", "{not json", "device profile"),
    ],
)
def test_an_option_value_the_engine_cannot_use_is_refused_when_the_options_are_made(field, value, words):
    with pytest.raises(cubeslab.InvalidInputError, match=words):
        _engine.IngestOptions(**{field: value})


def test_every_ingest_option_is_a_typed_field_with_help_and_a_default():
    options = _engine.IngestOptions()
    assert len(FIELDS) >= 15
    for field in FIELDS:
        assert hasattr(options, field), field
        assert _engine.IngestOptions.help()[field].strip(), field
    assert options.inline_byte == 189 and options.crossline_byte == 193 and options.offset_byte == 37
    assert (options.layout, options.compress, options.dtype, options.endian) == (
        "auto",
        "none",
        "float32",
        "auto",
    )


def _stub_class(name: str) -> ast.ClassDef:
    tree = ast.parse(STUB.read_text())
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _is_property(f: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list)


def test_the_type_stub_types_every_field_of_the_option_objects():
    for name, fields in (
        ("IngestOptions", FIELDS),
        ("ExportOptions", ["format", "overwrite", "threads", "in_flight"]),
    ):
        stub = _stub_class(name)
        properties = {
            f.name: ast.unparse(f.returns)
            for f in stub.body
            if isinstance(f, ast.FunctionDef) and f.returns and _is_property(f)
        }
        init = next(f for f in stub.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
        keywords = {a.arg: ast.unparse(a.annotation) for a in init.args.kwonlyargs if a.annotation}
        engine_object = getattr(_engine, name)()
        for field in fields:
            assert field in properties and field in keywords, (name, field)
            assert "Any" not in properties[field], (name, field)
            assert hasattr(engine_object, field), (name, field)
        assert set(properties) == set(fields), name


def test_the_python_api_takes_its_defaults_from_the_engine():
    engine = _engine.IngestOptions()
    parameters = inspect.signature(cubeslab.ingest).parameters
    shared = [f for f in FIELDS if f in parameters and parameters[f].default is not None]
    assert {"inline_byte", "crossline_byte", "offset_byte", "layout", "endian", "vertical"} <= set(shared)
    for field in shared:
        if not isinstance(parameters[field].default, bool):
            assert parameters[field].default == getattr(engine, field), field


def test_the_command_line_shows_the_engines_help_and_defaults():
    import typer.main

    from cubeslab.cli import app

    command = typer.main.get_command(app).commands["ingest"]  # type: ignore[attr-defined]
    by_name = {p.name: p for p in command.params}
    renamed = {"sample_interval": "sample_interval_us"}
    checked = 0
    for name, param in by_name.items():
        field = renamed.get(name, name)
        if field in FIELDS:
            assert param.help == _engine.IngestOptions.help()[field], name
            checked += 1
    assert checked >= 15
    engine = _engine.IngestOptions()
    for field in ("inline_byte", "crossline_byte", "offset_byte", "layout", "compress", "dtype"):
        assert by_name[field].default == getattr(engine, field), field
