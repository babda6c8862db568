"""tf.contrib.framework on recflow: arg_scope and the variable helpers TF-slim uses (the
names in arg_scope.__all__ and variables.__all__)."""

# pylint: disable=wildcard-import,unused-wildcard-import
from recflow.contrib.framework.arg_scope import *  # noqa: F401,F403
from recflow.contrib.framework.variables import *  # noqa: F401,F403
