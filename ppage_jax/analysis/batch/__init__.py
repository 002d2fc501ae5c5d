"""Training and reading many reward designs at once: the designs and the batch they are
trained in (``spec``, ``arms``), the compiled program (``program``), the trainers
(``trainers``), monitoring (``monitoring``), the run metrics (``metrics``), the audit rows
(``auditing``), the writer base (``output``) and the reading of spec files (``reading``): the
ground that sweeps (:mod:`ppage_jax.analysis.sweep`) and searches
(:mod:`ppage_jax.analysis.search`) both stand on. It imports neither of them."""
