"""The training algorithms, one file each (registered in :mod:`ppage_jax.train.registry`)."""
