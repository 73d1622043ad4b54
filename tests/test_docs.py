"""The examples in docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import cubeslab

MODULES = ["cubeslab"] + [
    info.name
    for info in pkgutil.walk_packages(cubeslab.__path__, "cubeslab.")
    if info.name != "cubeslab._engine"
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_the_examples_exist():
    counts = [
        doctest.testmod(importlib.import_module(m)).attempted
        for m in ("cubeslab.selection", "cubeslab.compression")
    ]
    assert all(n > 0 for n in counts)
