"""Adapters to other multi-agent APIs: ``pettingzoo`` (ParallelEnv) and ``jaxmarl`` (dict-keyed
JAX API). Import the submodule you need; ``pettingzoo`` needs the ``compat`` extra."""
