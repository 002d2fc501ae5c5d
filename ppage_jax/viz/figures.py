"""Figures saved to files without touching matplotlib's global state.

``matplotlib.use("Agg")`` inside a library call switches the backend of the whole process,
which silently stops a notebook's inline plots after the call. These helpers build a bare
``Figure`` (rendered by Agg when saved) that pyplot never sees, with pyplot's names so a
plotting function can ``from ppage_jax.viz import figures as plt``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ppage_jax.artifacts import save_figure


def subplots(*args: Any, figsize: tuple[float, float] | None = None, **kwargs: Any):
    """Like ``pyplot.subplots``: ``(fig, axes)``, with the figure kept out of pyplot."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*args, **kwargs)


def close(fig: Figure) -> None:
    """Nothing to release (pyplot never held the figure); kept for pyplot parity."""
    del fig


def write_figure(fig: Figure, path: str | os.PathLike, dpi: float) -> Path:
    """Lay ``fig`` out tightly and save it to ``path`` at ``dpi``, its folder made first and
    the file written atomically (:func:`ppage_jax.artifacts.save_figure`); returns the path."""
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=dpi)
    return path
