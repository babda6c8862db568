"""tf.metrics (TF 1.x names)."""

# pylint: disable=unused-import
from recflow.ops.metrics_impl import accuracy, auc, mean
