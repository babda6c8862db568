"""tf.nn (TF 1.x names)."""

# pylint: disable=unused-import
from recflow.ops.math_ops import sigmoid, tanh
from recflow.ops.nn_ops import (batch_normalization, bias_add, dropout, elu, embedding_lookup,
                                embedding_lookup_sparse, l2_loss, leaky_relu, log_softmax,
                                moments, relu, relu6, safe_embedding_lookup_sparse, selu,
                                sigmoid_cross_entropy_with_logits, softmax,
                                softmax_cross_entropy_with_logits,
                                softmax_cross_entropy_with_logits_v2, softplus,
                                sparse_softmax_cross_entropy_with_logits)
