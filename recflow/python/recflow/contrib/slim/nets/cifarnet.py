"""CifarNet as TF-slim defines it (the network of TensorFlow's CIFAR-10 tutorial): two 5x5
convolutions of 64 filters with max pooling and local response normalization, fully
connected layers of 384 and 192 units, the logits. Inputs [batch, 32, 32, 3] by default."""

from recflow.contrib import slim
from recflow.ops import gen_ops as gen
from recflow.ops import init_ops
from recflow.ops import nn_ops
from recflow.ops import variable_scope


def _trunc_normal(stddev):
  return init_ops.truncated_normal_initializer(stddev=stddev)


def _lrn(net, name):
  return gen.lrn(net, depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name)


def cifarnet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
             prediction_fn=slim.softmax, scope="CifarNet"):
  """(logits, end_points); with num_classes 0 or None, the 192-unit layer's output."""
  end_points = {}
  with variable_scope.variable_scope(scope, "CifarNet", [images]):
    net = end_points["conv1"] = slim.conv2d(images, 64, [5, 5], scope="conv1")
    net = end_points["pool1"] = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
    net = _lrn(net, "norm1")
    net = end_points["conv2"] = slim.conv2d(net, 64, [5, 5], scope="conv2")
    net = _lrn(net, "norm2")
    net = end_points["pool2"] = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
    net = slim.flatten(net)
    end_points["Flatten"] = net
    net = end_points["fc3"] = slim.fully_connected(net, 384, scope="fc3")
    net = end_points["dropout3"] = slim.dropout(net, dropout_keep_prob,
                                                is_training=is_training, scope="dropout3")
    net = end_points["fc4"] = slim.fully_connected(net, 192, scope="fc4")
    if not num_classes:
      return net, end_points
    logits = end_points["Logits"] = slim.fully_connected(
        net, num_classes, biases_initializer=init_ops.zeros_initializer(),
        weights_initializer=_trunc_normal(1 / 192.0), weights_regularizer=None,
        activation_fn=None, scope="logits")
  end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
  return logits, end_points


cifarnet.default_image_size = 32


def cifarnet_arg_scope(weight_decay=0.004):
  with slim.arg_scope([slim.conv2d], weights_initializer=_trunc_normal(5e-2),
                      activation_fn=nn_ops.relu):
    with slim.arg_scope([slim.fully_connected],
                        biases_initializer=init_ops.constant_initializer(0.1),
                        weights_initializer=_trunc_normal(0.04),
                        weights_regularizer=slim.l2_regularizer(float(weight_decay)),
                        activation_fn=nn_ops.relu) as sc:
      return sc
