"""tf.contrib.layers on recflow: TF-slim's layers, initializers and regularizers
(docs/slim.md)."""

# pylint: disable=unused-import
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
