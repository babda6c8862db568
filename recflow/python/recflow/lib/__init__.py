"""Library code behind tf.io / tf.python_io (TensorFlow's tensorflow/python/lib)."""
