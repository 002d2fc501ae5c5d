"""Adapters to other multi-agent APIs: ``pettingzoo`` (ParallelEnv, AEC, SuperSuit-ready)
and ``jaxmarl`` (dict-keyed JAX API). Import the submodule you need; both need the ``compat``
extra. ``bounds`` holds the observation bounds of each builder, ``spec`` what the adapters
read before the first step. See docs/compatibility.md."""
