"""Pictures: frames of a state (pure JAX), episode GIFs and saved figures."""
