"""TF-slim's data sets on recflow: dataset_utils (tf.Example helpers, label files),
digits (scikit-learn's 8x8 handwritten digits, converted to TFRecords) and
dataset_factory."""
