"""tf.contrib.layers on recflow: TF-slim's layers, initializers and regularizers
(docs/slim.md): the names in the __all__ of layers, initializers and regularizers, and
the utils module."""

# pylint: disable=wildcard-import,unused-wildcard-import,unused-import
from recflow.contrib.layers import utils
from recflow.contrib.layers.initializers import *  # noqa: F401,F403
from recflow.contrib.layers.layers import *  # noqa: F401,F403
from recflow.contrib.layers.regularizers import *  # noqa: F401,F403
