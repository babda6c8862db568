"""tf.data.experimental: the parts recflow has."""

from recflow.data.dataset_ops import AUTOTUNE  # pylint: disable=unused-import
