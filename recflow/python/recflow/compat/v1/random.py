"""tf.random (TF 1.x names)."""

# pylint: disable=unused-import
from recflow.framework.random_seed import set_random_seed
from recflow.ops.random_ops import random_normal as normal
from recflow.ops.random_ops import random_uniform as uniform
from recflow.ops.random_ops import truncated_normal
