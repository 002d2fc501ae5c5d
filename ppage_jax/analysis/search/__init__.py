"""Reward search: propose reward weights with an evolution strategy (evosax), train every
candidate x seed as one compiled program per generation, rank on the task metric under the
reward-hacking constraint, and re-evaluate the selected design on fresh seeds and layouts.

Modules: ``spec`` (the search file), ``space`` (searched keys, unit cube, candidates),
``strategies`` (evosax ask/tell), ``constraint`` (feasibility and ranking), ``programs`` (the
compiled sweep program), ``writer`` (files, resume), ``reevaluate`` (honest selection),
``report`` (report.md, pictures, rewards.yaml), ``run`` (:func:`search_rewards`).
"""

from ppage_jax.analysis.search.run import search_rewards
from ppage_jax.analysis.search.spec import SearchSpec, load_search

__all__ = ["SearchSpec", "load_search", "search_rewards"]
