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

# pylint: disable=unused-import
from recflow.contrib.framework.arg_scope import (add_arg_scope, arg_scope, arg_scope_func_key,
                                                 arg_scoped_arguments, current_arg_scope,
                                                 has_arg_scope)
from recflow.contrib.framework.variables import (VariableDeviceChooser, add_model_variable,
                                                 assert_global_step,
                                                 assign_from_checkpoint_fn,
                                                 create_global_step, filter_variables,
                                                 get_global_step, get_local_variables,
                                                 get_model_variables,
                                                 get_or_create_global_step,
                                                 get_trainable_variables, get_unique_variable,
                                                 get_variables, get_variables_by_name,
                                                 get_variables_by_suffix,
                                                 get_variables_to_restore, local_variable,
                                                 model_variable, variable)
from recflow.contrib.layers import utils
from recflow.contrib.layers.initializers import (variance_scaling_initializer,
                                                 xavier_initializer, xavier_initializer_conv2d)
from recflow.contrib.layers.layers import (avg_pool2d, batch_norm, bias_add, conv2d,
                                           convolution, convolution2d, dropout, flatten,
                                           fully_connected, linear, max_pool2d,
                                           one_hot_encoding, relu, relu6, repeat,
                                           separable_conv2d, separable_convolution2d, softmax,
                                           stack)
from recflow.contrib.layers.regularizers import (apply_regularization, l1_l2_regularizer,
                                                 l1_regularizer, l2_regularizer,
                                                 sum_regularizer)
from recflow.contrib.slim import evaluation
from recflow.contrib.slim import learning
from recflow.contrib.slim import losses
from recflow.contrib.slim import metrics
from recflow.contrib.slim.data import data_decoder
from recflow.contrib.slim.data import data_provider
from recflow.contrib.slim.data import dataset
from recflow.contrib.slim.data import dataset_data_provider
from recflow.contrib.slim.data import tfexample_decoder
