"""tf.layers (TF 1.x names; tf.keras is not part of recflow)."""

# pylint: disable=unused-import
from recflow.layers.base import Layer
from recflow.layers.core import Dense, Dropout, Flatten, dense, dropout, flatten
from recflow.layers.normalization import BatchNormalization, batch_normalization
