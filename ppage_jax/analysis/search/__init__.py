"""Reward search: propose reward weights with a strategy (evosax's CMA-ES, SNES, random
search, or population-based training), train every candidate x seed as one compiled program
per generation, rank on the task metric under the reward-hacking constraint (and, opt-in,
the analytic stall margin), and re-evaluate the selected design on fresh seeds and layouts;
repeat whole searches to compare strategies as strategies.

Modules: ``spec`` (the search file), ``space`` (searched keys, unit cube, candidates,
bounds), ``strategies`` (evosax ask/tell, the shared start distribution), ``constraint``
(feasibility and ranking), ``programs`` (the compiled sweep program), ``pbt``
(population-based training and its schedule), ``writer`` (files, resume), ``reevaluate``
(honest selection), ``report`` (report.md, pictures, rewards.yaml), ``run``
(:func:`search_rewards`), ``repeat`` (repeated searches per strategy), ``compare``
(strategies compared at the seed level).
"""

from ppage_jax.analysis.search.run import search_rewards
from ppage_jax.analysis.search.spec import SearchSpec, load_search

__all__ = ["SearchSpec", "load_search", "search_rewards"]
