"""The ``experiment`` section of a config and every algorithm's hyperparameter declaration,
one module per algorithm family. Nothing here imports a learner.

- :mod:`~ppage_jax.config.experiment.section`: the section's schema, defaults and validator;
- :mod:`~ppage_jax.config.experiment.roles`: what ``experiment.roles`` may say;
- :mod:`~ppage_jax.config.experiment.curriculum`: the schema of ``experiment.curriculum``;
- :mod:`~ppage_jax.config.experiment.base`: :func:`~ppage_jax.config.experiment.base.param`,
  the shared bases (:class:`~ppage_jax.config.experiment.base.Hyperparams`, ...) and the
  functions that read a declaration;
- the families, each listing its algorithms by name in ``DECLARED``:
  :mod:`~ppage_jax.config.experiment.random`, :mod:`~ppage_jax.config.experiment.ppo` (ippo,
  mappo), :mod:`~ppage_jax.config.experiment.dqn`, :mod:`~ppage_jax.config.experiment.tabular`
  (iql, cql, mixed, jalgt) and :mod:`~ppage_jax.config.experiment.actor_critic` (actor_critic,
  a2c, a3c);
- :mod:`~ppage_jax.config.experiment.algorithms`: the families' tables joined
  (``ALGORITHM_PARAMS``), :func:`~ppage_jax.config.experiment.algorithms.declare_algorithm`
  and the documentation tables.

A shipped algorithm is its declaration here (in its family's ``DECLARED``) plus its module
``ppage_jax.train.algorithms.<name>``: the training registry finds the module by the name.
"""
