"""The examples in docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["cubeslab", "cubeslab.array", "cubeslab.compression", "cubeslab.cube"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_the_examples_exist():
    counts = [
        doctest.testmod(importlib.import_module(m)).attempted
        for m in ("cubeslab.array", "cubeslab.compression")
    ]
    assert all(n > 0 for n in counts)
