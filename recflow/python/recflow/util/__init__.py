"""Utilities shared by the recflow package (nest: nested structures, as tf.nest)."""
