"""TF-slim's data package: Dataset descriptions, decoders of tf.Example records and a
data provider over recflow's tf.data pipelines."""
