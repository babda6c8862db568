"""TF-slim on recflow: `import recflow.contrib.slim as slim` (or tf.contrib.slim).

The names of tensorflow.contrib.slim: arg_scope, the layers (conv2d, separable_conv2d,
fully_connected, batch_norm, max_pool2d, avg_pool2d, flatten, dropout, repeat, stack,
...), regularizers and initializers, the variable helpers (model_variable,
get_variables_to_restore, assign_from_checkpoint_fn, ...), slim.losses, slim.metrics,
slim.learning (create_train_op, train), slim.evaluation and the data modules (dataset,
tfexample_decoder, dataset_data_provider).

The model library of TF-slim's research repository lives beside it:
recflow.contrib.slim.nets (lenet, cifarnet, mobilenet_v1, resnet_v1 and nets_factory),
.datasets (dataset_factory, dataset_utils, digits), .preprocessing and .deployment
(model_deploy). docs/slim.md has the whole list and what differs from TensorFlow.
"""

# pylint: disable=wildcard-import,unused-wildcard-import,unused-import
from recflow.contrib.framework import *  # noqa: F401,F403
from recflow.contrib.layers import *  # noqa: F401,F403
from recflow.contrib.layers import utils
from recflow.contrib.slim import evaluation
from recflow.contrib.slim import learning
from recflow.contrib.slim import losses
from recflow.contrib.slim import metrics
from recflow.contrib.slim.data import data_decoder
from recflow.contrib.slim.data import data_provider
from recflow.contrib.slim.data import dataset
from recflow.contrib.slim.data import dataset_data_provider
from recflow.contrib.slim.data import tfexample_decoder
