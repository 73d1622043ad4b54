"""Pictures of planes: what ``cubeslab read -o x.png`` and the demo write."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InvalidInputError, SelectionError
from .labels import is_text


def pyplot():
    """matplotlib's pyplot, drawing to files; an error saying how to get it when it is missing."""
    try:
        import matplotlib
    except ImportError:
        raise InvalidInputError(
            "pictures need matplotlib, which is not installed: pip install 'cubeslab[plot]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(data: np.ndarray, path: Path, title: str, axes=None) -> None:
    """A seismic-style picture: grey scale clipped at the 99th percentile, the second axis downward.

    axes: ((name, labels), (name, labels)) for the plane's two dimensions, to label the picture.
    """
    plt = pyplot()
    if data.ndim != 2:
        raise SelectionError(f"a picture needs a 2-D plane; this selection is {data.ndim}-D {data.shape}")
    finite = data[np.isfinite(data)] if data.dtype.kind == "f" else data
    clip = float(np.percentile(np.abs(finite), 99)) if finite.size else 1.0
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    extent = None
    if axes is not None:
        (xname, xs), (yname, ys) = axes
        # Text labels (region names, ...) name positions, shown as tick labels.
        xv, yv = (np.arange(len(v)) if is_text(v) else v for v in (xs, ys))
        extent = (float(xv[0]), float(xv[-1]), float(yv[-1]), float(yv[0]))
        ax.set_xlabel(xname)
        ax.set_ylabel(yname)
        for labels, ticks in ((xs, ax.set_xticks), (ys, ax.set_yticks)):
            if is_text(labels):
                shown = np.unique(np.linspace(0, len(labels) - 1, min(len(labels), 12)).astype(int))
                ticks(shown, labels[shown].tolist())
    ax.imshow(
        data.T, cmap="gray", aspect="auto", vmin=-clip, vmax=clip, interpolation="nearest", extent=extent
    )
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def save_ion_image_png(data: np.ndarray, path: Path, title: str, axes) -> None:
    """An ion image (x across, y down, as the pixels lie on the slide) in a perceptual colour map."""
    plt = pyplot()
    (xname, xs), (yname, ys) = axes
    fig, ax = plt.subplots(figsize=(6, 5), dpi=100)
    extent = (float(xs[0]) - 0.5, float(xs[-1]) + 0.5, float(ys[-1]) + 0.5, float(ys[0]) - 0.5)
    shown = ax.imshow(data.T, cmap="viridis", interpolation="nearest", extent=extent)
    fig.colorbar(shown, ax=ax, label="intensity")
    ax.set_xlabel(xname)
    ax.set_ylabel(yname)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def save_spectrum_png(mz: np.ndarray, intensity: np.ndarray, path: Path, title: str) -> None:
    """A spectrum: intensity against m/z."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.plot(mz, intensity, linewidth=0.7)
    ax.set_xlabel("m/z")
    ax.set_ylabel("intensity")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
