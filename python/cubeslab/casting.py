"""What a window write accepts: values that writing into an array of a given type keeps as they are,
under numpy's casting rules, or refused with the value that would change."""

from __future__ import annotations

import numpy as np

from .errors import InvalidInputError

CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")
"""numpy's casting rules, which :meth:`Array.write` takes."""


def as_numbers(path: str, values, dtype: np.dtype) -> np.ndarray:
    """``values`` as a numpy array. Python integers beyond int64, which numpy keeps as objects, become
    floats for a float array; for an integer array they are out of range."""
    array = np.asarray(values)
    if array.dtype != object or not array.size:
        return array
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in array.flat):
        return array  # refused by _check_cast as no numbers
    if dtype.kind in "fc":
        try:
            return array.astype(np.float64)
        except OverflowError:
            outside = next(v for v in array.flat if abs(v) > int(np.finfo(np.float64).max))
            raise InvalidInputError(
                f"{path}: {outside} is outside {dtype}'s range (largest {np.finfo(dtype).max:g})"
            ) from None
    limits = np.iinfo(dtype)
    outside = next((v for v in array.flat if not limits.min <= v <= limits.max), None)
    if outside is None:
        return array.astype(dtype)
    raise InvalidInputError(f"{path}: {outside} is outside {dtype}'s range ({limits.min}..{limits.max})")


def check_cast(path: str, values: np.ndarray, dtype: np.dtype, casting: str) -> None:
    """Refuse values that writing into a ``dtype`` array would change, unless ``casting`` is
    ``"unsafe"``: of another kind than numpy's ``casting`` allows, or integers outside the array's range
    (checked value by value, so that numpy's default int64 writes into any integer array they fit)."""
    if values.dtype.kind not in "biufc":
        raise InvalidInputError(
            f"{path}: {values.dtype} values (None, text, objects) are no numbers to write"
        )
    if casting == "unsafe":
        return
    integers = values.dtype.kind in "biu" and dtype.kind in "iu"
    kind_allowed = np.can_cast(values.dtype, dtype, casting=casting)  # type: ignore[arg-type]
    if not (kind_allowed or (integers and casting == "same_kind")):
        raise InvalidInputError(
            f"{path}: writing {values.dtype} values into this {dtype} array would change "
            f"them; convert them first, or pass casting='unsafe'"
        )
    if integers and values.size and not np.can_cast(values.dtype, dtype):
        limits = np.iinfo(dtype)
        low, high = int(values.min()), int(values.max())
        if low < limits.min or high > limits.max:
            outside = low if low < limits.min else high
            raise InvalidInputError(
                f"{path}: {outside} is outside {dtype}'s range ({limits.min}..{limits.max}); "
                "pass casting='unsafe' to wrap it as numpy's astype does"
            )


def check_overflow(path: str, source: np.ndarray, written: np.ndarray, casting: str) -> None:
    """Refuse finite values that became infinite on their way into a narrower float array."""
    # A type the array's holds every value of (float32 into float32) cannot overflow: no pass over the data.
    if casting == "unsafe" or written.dtype.kind not in "fc" or np.can_cast(source.dtype, written.dtype):
        return
    if not np.isinf(written).any():
        return
    grew = np.isinf(written) & np.isfinite(source)
    if grew.any():
        value = source[grew].flat[0]
        raise InvalidInputError(
            f"{path}: {value} is outside {written.dtype}'s range (largest {np.finfo(written.dtype).max:g}); "
            "pass casting='unsafe' to store it as infinity"
        )
