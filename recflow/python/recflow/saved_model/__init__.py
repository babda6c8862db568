"""SavedModel in TensorFlow 1.15's layout: builder, loader, signatures
(exported as tf.saved_model by recflow.compat.v1)."""
