"""tf.nn (TF 1.x names)."""

# pylint: disable=unused-import
from recflow.ops.image_ops import local_response_normalization, lrn
from recflow.ops.math_ops import sigmoid, tanh
from recflow.ops.nn_ops import (avg_pool, avg_pool2d, batch_normalization, bias_add, conv2d,
                                conv2d_backprop_input, conv2d_transpose, convolution,
                                depthwise_conv2d, depthwise_conv2d_native, dropout, elu,
                                embedding_lookup, embedding_lookup_sparse, l2_loss, leaky_relu,
                                log_softmax, max_pool, max_pool2d, moments, relu, relu6,
                                safe_embedding_lookup_sparse, selu, separable_conv2d,
                                sigmoid_cross_entropy_with_logits, softmax,
                                softmax_cross_entropy_with_logits,
                                softmax_cross_entropy_with_logits_v2, softplus,
                                sparse_softmax_cross_entropy_with_logits)
