"""tf.saved_model.tag_constants (TF 1.15's values)."""

SERVING = "serve"
TRAINING = "train"
EVAL = "eval"
GPU = "gpu"
TPU = "tpu"
