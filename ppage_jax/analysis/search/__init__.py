"""Reward search: propose reward weights with a strategy (evosax's CMA-ES, SNES, random
search, or population-based training), train every candidate x seed as one compiled program
per generation, rank on the task metric under the reward-hacking constraint (and, opt-in,
the analytic stall margin), and re-evaluate the selected design on fresh seeds and layouts;
repeat whole searches to compare strategies as strategies.

Modules: ``spec`` (the search file: :func:`load_search` composing one reader per section),
``sections`` (the readers of its larger sections: settings, space, pbt, compare), ``space``
(searched keys, unit cube, candidates, bounds), ``strategies`` (evosax ask/tell, the shared
start distribution), ``constraint`` (feasibility and ranking, of candidates and of PBT's
members), ``programs`` (the compiled sweep program; PBT's population programs, exploit and
explore), ``writer`` (files, resume, pick.json), ``reevaluate`` (honest selection), ``plan``
(what every strategy shares: the options, the plan, opening, re-evaluating the pick,
finishing), ``run`` (:func:`search_rewards`: the evolution strategies' generations),
``pbt`` (population-based training and its schedule), ``report`` (report.md, pictures,
rewards.yaml), ``repeat`` (repeated searches per strategy), ``compare`` (strategies compared
at the seed level).
"""

from ppage_jax.analysis.search.run import search_rewards
from ppage_jax.analysis.search.spec import SearchSpec, load_search

__all__ = ["SearchSpec", "load_search", "search_rewards"]
