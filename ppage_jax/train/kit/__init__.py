"""Pieces the algorithms share: networks, encoders, rollout, exploration, optimisers."""
