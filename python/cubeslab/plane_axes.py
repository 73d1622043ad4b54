"""Planes along one dimension of an array, selected by survey label (``cube.inline[2400]``) or by
position (``cube.depth_slice[k]``), as segyio's line and depth-slice modes select them."""

from __future__ import annotations

import numpy as np

from .array import Array
from .errors import LabelError, SelectionError
from .labels import is_text


def _is_scalar(key) -> bool:
    return not isinstance(key, (slice, list, tuple, np.ndarray)) or (
        isinstance(key, np.ndarray) and key.ndim == 0
    )


def _shown(value) -> str:
    """A label or position as a message shows it: ``111``, ``5.0`` (not ``np.int64(111)``), ``'x'``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(float(value))
    return repr(value)


def _refuse_tuple(name: str, key: tuple) -> SelectionError:
    return SelectionError(
        f"{name}[{', '.join(map(_shown, key))}]: a tuple here would be segyio's (line, offset) selection, "
        f"which cubeslab does not offer; pass a list for several {name} planes, "
        f"{name}[[{', '.join(map(_shown, key))}]], or index the cube by position"
    )


def _read_planes(planes: Array, dim: int, positions: np.ndarray) -> np.ndarray:
    """The planes at ``positions`` along ``dim``, stacked along a new first axis.

    Evenly spaced positions are read in one engine call (a strided window, its
    axis then moved first: a view, not a copy); others plane by plane.
    """
    positions = np.asarray(positions, dtype=np.int64)
    plane_shape = tuple(n for d, n in enumerate(planes.shape) if d != dim)
    key: list[slice | int] = [slice(None)] * planes.ndim
    steps = np.diff(positions)
    if positions.size == 0:
        return np.empty((0, *plane_shape), dtype=planes.dtype)
    if positions.size == 1 or (steps[0] != 0 and bool((steps == steps[0]).all())):
        first, last = int(positions[0]), int(positions[-1])
        step = int(steps[0]) if positions.size > 1 else 1
        stop = last + (1 if step > 0 else -1)
        key[dim] = slice(first, stop if stop >= 0 else None, step)
        return np.moveaxis(planes.read(tuple(key)), dim, 0)
    out = np.empty((positions.size, *plane_shape), dtype=planes.dtype)
    for row, position in zip(out, positions, strict=True):
        key[dim] = int(position)
        planes.read(tuple(key), out=row)
    return out


class LabelAxis:
    """Planes selected by survey label along one dimension, as segyio's ``f.iline``.

    Labels are the survey's numbers (inline, crossline, offset) or sample times
    / depths in ms or m, not positions; ``labels`` lists them. A key is:

    - one label: ``cube.inline[2400]`` gives one plane (``ndarray``);
    - a slice of labels: ``cube.inline[2400:2410:2]`` gives the planes whose
      labels are in ``range(2400, 2410, 2)`` and exist, as segyio's
      ``f.iline[2400:2410:2]`` yields them (stop exclusive, step in label
      units, a negative step runs backwards, an omitted start or stop means
      the first or last label, labels the survey lacks are skipped). Exactly
      as in segyio, the range is ``range(*key.indices(last + 1))``: a
      negative bound counts back from the last label + 1 (``[-5:]`` is the
      last five label numbers) and a start past the last label steps back
      from the last one (in surveys with negative labels bounds are plain
      labels instead);
    - on the sample axis (``cube.time_slice``), or any axis whose labels are
      not whole numbers, a slice of values ``[t0:t1:step]`` gives the planes
      with ``t0 <= t < t1`` (as xarray's ``.sel``); the step, in label units,
      must be a multiple of the label interval and counts from the first
      plane selected;
    - a list (or array) of labels: those planes, each of which must exist.

    Several planes come back stacked in one ``ndarray`` whose first axis runs
    over the selected labels (``numpy.stack`` of what segyio yields one by one),
    read in one call when they are evenly spaced. A label the survey does not
    have raises :class:`~cubeslab.LabelError`.
    """

    def __init__(self, planes: Array, dim: int, name: str, labels: np.ndarray, survey: object):
        """``survey`` (a store's path) is what a missing label's message names."""
        self._planes, self._dim, self._survey = planes, dim, survey
        self.name = name
        self.labels: np.ndarray = labels

    def _range_text(self) -> str:
        labels = self.labels
        if labels.size == 0:
            return f"this survey has no {self.name} values"
        if is_text(labels):
            shown = ", ".join(map(repr, labels[:8].tolist())) + (", ..." if labels.size > 8 else "")
            return f"its {self.name} labels are {shown} ({labels.size} labels)"
        spacing = np.diff(labels)
        step = f", step {_shown(spacing[0])}" if spacing.size and np.allclose(spacing, spacing[0]) else ""
        first, last = _shown(labels[0]), _shown(labels[-1])
        return f"its {self.name} values run {first}..{last} ({labels.size} values{step})"

    def index(self, label) -> int:
        """Position of ``label`` along the axis."""
        if not _is_scalar(label):
            raise SelectionError(f"{self.name} index: {_shown(label)} is not one label")
        if isinstance(label, (bool, np.bool_)) and self.labels.dtype.kind != "b":
            raise SelectionError(
                f"{self.name} index: {label} is a truth value, not a label; {self._range_text()}"
            )
        if self.labels.dtype.kind == "f":
            try:
                tolerance = 1e-6 * max(1.0, abs(float(label)))
            except (TypeError, ValueError):
                tolerance = None
            hits = (
                np.flatnonzero(np.isclose(self.labels, label, rtol=0, atol=tolerance))
                if tolerance is not None
                else np.empty(0, dtype=np.intp)
            )
        else:
            hits = np.flatnonzero(self.labels == label)
        if hits.size == 0:
            raise LabelError(
                f"{self._survey}: {self.name} {_shown(label)} is not in this survey: {self._range_text()}"
            )
        return int(hits[0])

    def positions(self, key) -> np.ndarray:
        """Positions along the axis of the planes ``key`` selects (a label, slice or list), in order."""
        if isinstance(key, slice):
            if is_text(self.labels):
                return self._text_positions(key)
            if self._dim == self._planes.ndim - 1 or self.labels.dtype.kind == "f":
                return self._sample_positions(key)
            return self._line_positions(key)
        if isinstance(key, tuple):
            raise _refuse_tuple(self.name, key)
        if _is_scalar(key):
            return np.array([self.index(key)], dtype=np.int64)
        return np.array([self.index(label) for label in key], dtype=np.int64)

    def _bounds(self, key: slice, integral: bool) -> tuple:
        values = (key.start, key.stop, key.step)
        for value in values:
            if value is None:
                continue
            ok = (
                isinstance(value, (int, np.integer))
                if integral
                else isinstance(value, (int, float, np.number))
            )
            if isinstance(value, bool) or not ok:
                kind = "integers" if integral else "numbers"
                raise SelectionError(
                    f"{self.name}[{key.start}:{key.stop}:{key.step}]: slice bounds must be {kind} or omitted"
                )
        if key.step is not None and key.step == 0:
            raise SelectionError(f"{self.name} slice step cannot be zero")
        return values

    def _text_positions(self, key: slice) -> np.ndarray:
        """A slice of text labels: from the start label up to the stop label (not included), every ``step``
        positions, as a list of them slices."""
        if key.step is not None and (not isinstance(key.step, (int, np.integer)) or key.step == 0):
            raise SelectionError(f"{self.name} slice step must be a whole number of labels, not {key.step!r}")
        start = None if key.start is None else self.index(key.start)
        stop = None if key.stop is None else self.index(key.stop)
        return np.arange(self.labels.size, dtype=np.int64)[slice(start, stop, key.step)]

    def _line_positions(self, key: slice) -> np.ndarray:
        """segyio's line slice of whole-number labels: those in ``range(start, stop, step)`` that exist,
        in its order."""
        start, stop, step = self._bounds(key, integral=True)
        step = 1 if step is None else step
        values = self.labels.astype(np.int64)
        if values.size == 0:
            return np.empty(0, dtype=np.int64)
        if start is None:
            start = values.min() if step > 0 else values.max()
        if values.min() >= 0:
            # segyio's model: labels index a list 0..last, sliced as Python slices a list (a negative
            # bound counts back from last + 1, a start past the last label steps back from the last)
            start, stop, step = slice(int(start), stop, step).indices(int(values.max()) + 1)
        if step > 0:
            inside = values >= start
            if stop is not None:
                inside &= values < stop
        else:
            inside = values <= start
            if stop is not None:
                inside &= values > stop
        inside &= (values - start) % step == 0
        return self._ordered(np.flatnonzero(inside), step)

    def _sample_positions(self, key: slice) -> np.ndarray:
        """Samples with ``t0 <= t < t1`` (``t0 >= t > t1`` with a negative step), every ``step``."""
        start, stop, step = self._bounds(key, integral=False)
        values = self.labels.astype(np.float64)
        if values.size == 0:
            return np.empty(0, dtype=np.int64)
        forward = step is None or step > 0
        tolerance = 1e-6 * max(1.0, float(np.abs(values).max()))
        inside = np.ones(values.shape, dtype=bool)
        if start is not None:
            inside &= values >= start - tolerance if forward else values <= start + tolerance
        if stop is not None:
            inside &= values < stop - tolerance if forward else values > stop + tolerance
        positions = self._ordered(np.flatnonzero(inside), -1 if not forward else 1)
        if step is None:
            return positions
        spacing = np.diff(values)
        if spacing.size and np.allclose(spacing, spacing[0], rtol=1e-6, atol=tolerance):
            ratio = abs(step) / abs(spacing[0])
            if abs(ratio - round(ratio)) > 1e-6 * max(1.0, ratio) or round(ratio) == 0:
                raise SelectionError(
                    f"{self.name} slice step {step:g} is not a multiple of the sample interval "
                    f"{abs(spacing[0]):g}"
                )
        if positions.size == 0:
            return positions
        units = (values[positions] - values[positions[0]]) / step
        return positions[np.abs(units - np.round(units)) <= 1e-6 * max(1.0, float(np.abs(units).max()))]

    def _ordered(self, positions: np.ndarray, step) -> np.ndarray:
        order = np.argsort(self.labels[positions], kind="stable")
        return positions[order[::-1] if step < 0 else order].astype(np.int64)

    def __getitem__(self, key) -> np.ndarray:
        if _is_scalar(key):
            index: list[slice | int] = [slice(None)] * self._planes.ndim
            index[self._dim] = self.index(key)
            return self._planes.read(tuple(index))
        return _read_planes(self._planes, self._dim, self.positions(key))

    def __iter__(self):
        return (self[label] for label in self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return f"<{self.name} planes: {len(self)} labels>"


class PositionAxis:
    """Planes selected by position (0-based index) along one dimension, as segyio's ``f.depth_slice``.

    ``cube.depth_slice[k]`` is the horizontal plane of the k-th sample (``k``
    counts from 0; negative counts from the end), whatever its time or depth:
    segyio's meaning. A slice (Python semantics: ``[10:20:2]``, ``[::-1]``) or
    a list of positions gives the planes stacked along a new first axis. For a
    sample *time* in ms use ``cube.time_slice[t]``.
    """

    def __init__(self, planes: Array, dim: int, name: str):
        self._planes, self._dim, self.name = planes, dim, name

    def __len__(self) -> int:
        return self._planes.shape[self._dim]

    def _position(self, index) -> int:
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise SelectionError(
                f"{self.name}[{_shown(index)}]: {self.name} takes sample positions (integers from 0), as "
                f"in segyio; for a sample time or depth use time_slice[{_shown(index)}]"
            )
        n = len(self)
        position = int(index) + n if index < 0 else int(index)
        if not 0 <= position < n:
            raise SelectionError(f"{self.name} index {int(index)} is out of range: {n} samples (0..{n - 1})")
        return position

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            try:
                positions = np.arange(len(self))[key]
            except TypeError:
                raise SelectionError(
                    f"{self.name}[{key.start}:{key.stop}:{key.step}]: slice bounds must be integers"
                ) from None
            return _read_planes(self._planes, self._dim, positions)
        if isinstance(key, tuple):
            raise SelectionError(
                f"{self.name} takes one position, a slice or a list of positions, not a tuple"
            )
        if isinstance(key, (list, np.ndarray)) and np.ndim(key) > 0:
            return _read_planes(self._planes, self._dim, np.array([self._position(k) for k in key]))
        index: list[slice | int] = [slice(None)] * self._planes.ndim
        index[self._dim] = self._position(key.item() if isinstance(key, np.ndarray) else key)
        return self._planes.read(tuple(index))

    def __iter__(self):
        return (self[k] for k in range(len(self)))

    def __repr__(self) -> str:
        return f"<{self.name}: {len(self)} planes by position>"
