"""Pieces the algorithms share: networks, encoders, rollout, exploration, optimisers, the
update loop and the schedules it applies."""
