"""tf.distribute.cluster_resolver."""

from recflow.training.cluster_resolver import TFConfigClusterResolver  # pylint: disable=unused-import
