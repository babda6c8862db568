"""tf.losses (TF 1.x names)."""

# pylint: disable=unused-import
from recflow.ops.losses_impl import (Reduction, absolute_difference, add_loss,
                                     compute_weighted_loss, get_losses, get_regularization_loss,
                                     get_regularization_losses, get_total_loss, hinge_loss,
                                     huber_loss, log_loss, mean_squared_error,
                                     sigmoid_cross_entropy, softmax_cross_entropy,
                                     sparse_softmax_cross_entropy)
