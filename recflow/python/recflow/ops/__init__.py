"""Python ops: generated wrappers (gen_ops) and TensorFlow's Python-level APIs."""
