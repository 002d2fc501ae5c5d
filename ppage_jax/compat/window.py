"""A pygame window that shows rendered frames (``render_mode="human"``), as PPAGE does.

Needs pygame (the ``compat`` extra). Headless machines can use SDL's dummy video driver
(``SDL_VIDEODRIVER=dummy``): the window then draws off screen.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np


class Window:
    """Opens on the first :meth:`show`; frames are scaled to ``size_px`` on the longer side."""

    def __init__(self, title: str, size_px: int, fps: float):
        self.title, self.size_px, self.fps = title, int(size_px), float(fps)
        self._screen: Any = None  # pygame's display surface, once opened
        self._clock: Any = None  # its pygame.time.Clock

    def show(self, frame: np.ndarray) -> None:
        """Draw one uint8[H, W, 3] frame, handle window events, and keep ``fps``."""
        pygame = _pygame()
        height, width = frame.shape[:2]
        scale = self.size_px / max(height, width)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        if self._screen is None:
            pygame.display.init()
            pygame.display.set_caption(self.title)
            self._screen = pygame.display.set_mode(size)
            self._clock = pygame.time.Clock()
        surface = pygame.surfarray.make_surface(np.ascontiguousarray(frame.swapaxes(0, 1)))
        self._screen.blit(pygame.transform.scale(surface, self._screen.get_size()), (0, 0))
        pygame.event.pump()
        pygame.display.flip()
        self._clock.tick(self.fps)

    def close(self) -> None:
        if self._screen is not None:
            _pygame().display.quit()
            self._screen = self._clock = None


def _pygame():
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError:
        raise ImportError(
            'render_mode="human" needs pygame: pip install "ppage_jax[compat]"'
        ) from None
    return pygame
