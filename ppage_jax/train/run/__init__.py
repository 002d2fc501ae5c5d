"""Run plumbing: the runner, checkpoints, progress, monitor, report, curriculum, evaluation."""
