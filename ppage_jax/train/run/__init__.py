"""Run plumbing: the runner, checkpoints, monitor, report, curriculum, evaluation."""
