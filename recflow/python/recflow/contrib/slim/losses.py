"""slim.losses (tf.contrib.losses): the loss functions with their TF 1.x contrib argument
order -- logits or predictions first -- over tf.losses. Each adds its loss to the LOSSES
collection; get_total_loss sums them with the regularization losses."""

from recflow.ops import losses_impl
from recflow.ops.losses_impl import (add_loss, compute_weighted_loss, get_losses,  # pylint: disable=unused-import
                                     get_regularization_losses, get_total_loss)

__all__ = ["absolute_difference", "add_loss", "compute_weighted_loss", "get_losses",
           "get_regularization_losses", "get_total_loss", "hinge_loss", "log_loss",
           "mean_squared_error", "sigmoid_cross_entropy", "softmax_cross_entropy",
           "sparse_softmax_cross_entropy"]


def softmax_cross_entropy(logits, onehot_labels, weights=1.0, label_smoothing=0, scope=None):
  return losses_impl.softmax_cross_entropy(onehot_labels, logits, weights=weights,
                                           label_smoothing=label_smoothing, scope=scope)


def sparse_softmax_cross_entropy(logits, labels, weights=1.0, scope=None):
  return losses_impl.sparse_softmax_cross_entropy(labels, logits, weights=weights, scope=scope)


def sigmoid_cross_entropy(logits, multi_class_labels, weights=1.0, label_smoothing=0,
                          scope=None):
  return losses_impl.sigmoid_cross_entropy(multi_class_labels, logits, weights=weights,
                                           label_smoothing=label_smoothing, scope=scope)


def log_loss(predictions, labels=None, weights=1.0, epsilon=1e-7, scope=None):
  return losses_impl.log_loss(labels, predictions, weights=weights, epsilon=epsilon,
                              scope=scope)


def mean_squared_error(predictions, labels=None, weights=1.0, scope=None):
  return losses_impl.mean_squared_error(labels, predictions, weights=weights, scope=scope)


def absolute_difference(predictions, labels=None, weights=1.0, scope=None):
  return losses_impl.absolute_difference(labels, predictions, weights=weights, scope=scope)


def hinge_loss(logits, labels=None, scope=None):
  return losses_impl.hinge_loss(labels, logits, scope=scope)
