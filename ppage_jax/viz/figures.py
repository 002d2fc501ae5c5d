"""Figures saved to files without touching matplotlib's global state.

``matplotlib.use("Agg")`` inside a library call switches the backend of the whole process,
which silently stops a notebook's inline plots after the call. These helpers build a bare
``Figure`` (rendered by Agg when saved) that pyplot never sees, with pyplot's names so a
plotting function can ``from ppage_jax.viz import figures as plt``.
"""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure


def subplots(*args: Any, figsize: tuple[float, float] | None = None, **kwargs: Any):
    """Like ``pyplot.subplots``: ``(fig, axes)``, with the figure kept out of pyplot."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*args, **kwargs)


def close(fig: Figure) -> None:
    """Nothing to release (pyplot never held the figure); kept for pyplot parity."""
    del fig
