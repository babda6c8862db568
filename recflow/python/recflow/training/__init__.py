"""Training: optimizers and the global step (tf.train)."""
