"""TensorFlow-compatible APIs: `import recflow.compat.v1 as tf`."""
