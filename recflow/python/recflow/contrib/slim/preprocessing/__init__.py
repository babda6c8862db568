"""Image preprocessing for TF-slim's nets: preprocessing_factory.get_preprocessing(name)."""
