"""Numpy basic indices (integers, slices, an ellipsis) as the engine's windows: starts, stops and
positive steps per dimension."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import SelectionError


def is_whole(value) -> bool:
    """Whether ``value`` is a Python or numpy integer, and not a truth value (``True`` is an int)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


Window = tuple[list[int], list[int], list[int]]


def normalize_key(key, shape: Sequence[int]) -> tuple[Window, list[int], list[int]]:
    """Turn a numpy basic index into (starts, stops, steps), the dimensions to
    drop (integer indices) and the dimensions to reverse (negative steps).

    >>> normalize_key((1, slice(None, None, 2)), (3, 5))
    (([1, 0], [2, 5], [1, 2]), [0], [])
    """
    if not isinstance(key, tuple):
        key = (key,)
    # By identity: `in` and `index` compare with ==, which an array in the key answers element-wise.
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ellipses) > 1:
        raise SelectionError("an index can only have a single ellipsis ('...')")
    if ellipses:
        i = ellipses[0]
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1 :]
    if len(key) > len(shape):
        raise SelectionError(f"too many indices: {len(key)} for an array of {len(shape)} dimensions")
    key = key + (slice(None),) * (len(shape) - len(key))
    starts, stops, steps, drop, reverse = [], [], [], [], []
    for dim, (k, n) in enumerate(zip(key, shape, strict=True)):
        if is_whole(k):
            i = int(k) + n if k < 0 else int(k)
            if not 0 <= i < n:
                raise SelectionError(f"index {int(k)} is out of bounds for dimension {dim} of size {n}")
            starts.append(i)
            stops.append(i + 1)
            steps.append(1)
            drop.append(dim)
        elif isinstance(k, slice):
            if not all(v is None or is_whole(v) for v in (k.start, k.stop, k.step)):
                raise SelectionError(
                    f"slice {k.start}:{k.stop}:{k.step} for dimension {dim}: positions are whole numbers "
                    "(to select by coordinate value, use the cube's labels or xarray's .sel)"
                )
            if k.step == 0:
                raise SelectionError(f"slice step cannot be zero (dimension {dim})")
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if step < 0:
                reverse.append(dim)
                step = -step
                start = start - (count - 1) * step if count else 0
                stop = start + (count - 1) * step + 1 if count else 0
            elif count == 0:
                start = stop = 0
            starts.append(start)
            stops.append(max(start, stop))
            steps.append(step)
        else:
            raise SelectionError(
                f"unsupported index {k!r} for dimension {dim}: use integers and slices "
                "(then numpy indexing on the result)"
            )
    return (starts, stops, steps), drop, reverse
