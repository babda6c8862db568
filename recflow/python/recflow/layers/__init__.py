"""tf.layers (TensorFlow 1.15): Layer, Dense, Dropout, Flatten, BatchNormalization."""
