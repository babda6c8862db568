"""LeNet as TF-slim defines it: two 5x5 convolutions (32 and 64 filters, SAME padding) each
followed by 2x2 max pooling, a 1024-unit fully connected layer, dropout and the logits.
Inputs are [batch, 28, 28, channels] by default (lenet.default_image_size)."""

from recflow.contrib import slim
from recflow.ops import init_ops
from recflow.ops import nn_ops
from recflow.ops import variable_scope


def lenet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
          prediction_fn=slim.softmax, scope="LeNet"):
  """(logits [batch, num_classes], end_points); with num_classes 0 or None, the 1024-unit
  layer's output instead of logits (no dropout)."""
  end_points = {}
  with variable_scope.variable_scope(scope, "LeNet", [images]):
    net = end_points["conv1"] = slim.conv2d(images, 32, [5, 5], scope="conv1")
    net = end_points["pool1"] = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
    net = end_points["conv2"] = slim.conv2d(net, 64, [5, 5], scope="conv2")
    net = end_points["pool2"] = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
    net = end_points["Flatten"] = slim.flatten(net)
    net = end_points["fc3"] = slim.fully_connected(net, 1024, scope="fc3")
    if not num_classes:
      return net, end_points
    net = end_points["dropout3"] = slim.dropout(net, dropout_keep_prob,
                                                is_training=is_training, scope="dropout3")
    logits = end_points["Logits"] = slim.fully_connected(net, num_classes, activation_fn=None,
                                                         scope="fc4")
  end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
  return logits, end_points


lenet.default_image_size = 28


def lenet_arg_scope(weight_decay=0.0):
  """ReLU layers with truncated-normal(0.1) weights and L2 weight decay."""
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(float(weight_decay)),
                      weights_initializer=init_ops.truncated_normal_initializer(stddev=0.1),
                      activation_fn=nn_ops.relu) as sc:
    return sc
