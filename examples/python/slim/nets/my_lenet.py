"""A net defined outside recflow: LeNet written with slim layers in a file of its own and
registered with nets_factory, so train_image_classifier.py trains it without any change
to recflow:

  train_image_classifier.py --nets_module=examples/python/slim/nets/my_lenet.py \\
      --model_name=my_lenet

It is TF-slim's LeNet with a narrower first layer (20 filters) and a 500-unit fully
connected layer, as in LeCun's original.
"""

import recflow.compat.v1 as tf
from recflow.contrib import slim
from recflow.contrib.slim.nets import nets_factory


def my_lenet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
             scope="MyLeNet"):
  end_points = {}
  with tf.variable_scope(scope, "MyLeNet", [images]):
    net = slim.conv2d(images, 20, [5, 5], scope="conv1")
    net = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
    net = slim.conv2d(net, 50, [5, 5], scope="conv2")
    net = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
    net = slim.flatten(net)
    net = end_points["fc3"] = slim.fully_connected(net, 500, scope="fc3")
    net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout3")
    logits = end_points["Logits"] = slim.fully_connected(net, num_classes, activation_fn=None,
                                                         scope="fc4")
  end_points["Predictions"] = slim.softmax(logits, scope="Predictions")
  return logits, end_points


my_lenet.default_image_size = 28


def my_lenet_arg_scope(weight_decay=0.0):
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(float(weight_decay)),
                      weights_initializer=tf.truncated_normal_initializer(stddev=0.1),
                      activation_fn=tf.nn.relu) as sc:
    return sc


nets_factory.register_network("my_lenet", my_lenet, my_lenet_arg_scope, replace=True)
