"""The engine's type stub (python/cubeslab/_engine.pyi) against the compiled module: a type checker
trusts the stub, so a function added, renamed or given another parameter in Rust must show there."""

import ast
import inspect
from pathlib import Path

import pytest

from cubeslab import _engine

STUB = Path(_engine.__file__).with_name("_engine.pyi")


def stub_items() -> dict[str, ast.AST]:
    tree = ast.parse(STUB.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}


def stub_parameters(function: ast.FunctionDef) -> list[str]:
    names = [a.arg for a in function.args.args]
    names = names[1:] if names and names[0] == "self" else names
    return names + [a.arg for a in function.args.kwonlyargs]


def module_parameters(obj) -> list[str]:
    """Parameter names from the signature pyo3 records, without `self` / `$type`."""
    return [p for p in inspect.signature(obj).parameters if p not in ("self", "type")]


def public(namespace) -> set[str]:
    return {n for n in vars(namespace) if not n.startswith("_")}


def test_stub_names_what_the_module_has():
    assert STUB.is_file()
    assert STUB.with_name("py.typed").is_file()
    assert set(stub_items()) == public(_engine)


@pytest.mark.parametrize("name", sorted(public(_engine)))
def test_stub_signatures_match(name):
    item = stub_items()[name]
    obj = getattr(_engine, name)
    if isinstance(item, ast.FunctionDef):
        assert stub_parameters(item) == module_parameters(obj)
        return
    members = {n.name: n for n in item.body if isinstance(n, ast.FunctionDef)}
    # The constructor: pyo3 puts its signature on the class.
    assert stub_parameters(members["__init__"]) == module_parameters(obj)
    assert set(members) - {"__init__"} == public(obj)
    for member, node in members.items():
        attribute = inspect.getattr_static(obj, member)
        is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)
        assert is_property == inspect.isgetsetdescriptor(attribute), member
        if not is_property and member != "__init__":
            assert stub_parameters(node) == module_parameters(getattr(obj, member)), member
