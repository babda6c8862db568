"""MobileNet v1 as TF-slim defines it (Howard et al. 2017): a 3x3 stride-2 convolution,
then 13 depthwise-separable blocks (a 3x3 depthwise convolution and a 1x1 pointwise
convolution, each with batch norm and ReLU6), average pooling and 1x1-convolution logits.
depth_multiplier scales every layer's channels (never below min_depth);
mobilenet_v1_075 / _050 / _025 are the 0.75 / 0.5 / 0.25 widths."""

import collections
import functools

from recflow.contrib import slim
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import init_ops
from recflow.ops import math_ops
from recflow.ops import nn_ops
from recflow.ops import variable_scope

Conv = collections.namedtuple("Conv", ["kernel", "stride", "depth"])
DepthSepConv = collections.namedtuple("DepthSepConv", ["kernel", "stride", "depth"])

MOBILENETV1_CONV_DEFS = [
    Conv(kernel=[3, 3], stride=2, depth=32),
    DepthSepConv(kernel=[3, 3], stride=1, depth=64),
    DepthSepConv(kernel=[3, 3], stride=2, depth=128),
    DepthSepConv(kernel=[3, 3], stride=1, depth=128),
    DepthSepConv(kernel=[3, 3], stride=2, depth=256),
    DepthSepConv(kernel=[3, 3], stride=1, depth=256),
    DepthSepConv(kernel=[3, 3], stride=2, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=2, depth=1024),
    DepthSepConv(kernel=[3, 3], stride=1, depth=1024),
]


def mobilenet_v1_base(inputs, final_endpoint="Conv2d_13_pointwise", min_depth=8,
                      depth_multiplier=1.0, conv_defs=None, output_stride=None,
                      use_explicit_padding=False, scope=None):
  """The convolutional trunk up to final_endpoint: (net, end_points). output_stride (8, 16
  or 32) trades strides for atrous rates past that stride."""
  if depth_multiplier <= 0:
    raise ValueError("depth_multiplier is not greater than zero.")
  if output_stride is not None and output_stride not in (8, 16, 32):
    raise ValueError("Only allowed output_stride values are 8, 16, 32.")
  if use_explicit_padding:
    raise NotImplementedError("mobilenet_v1: use_explicit_padding is not supported by recflow")

  def depth(d):
    return max(int(d * depth_multiplier), min_depth)

  end_points = {}
  conv_defs = conv_defs or MOBILENETV1_CONV_DEFS
  with variable_scope.variable_scope(scope, "MobilenetV1", [inputs]):
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding="SAME"):
      current_stride = 1
      rate = 1
      net = inputs
      for i, conv_def in enumerate(conv_defs):
        end_point_base = "Conv2d_%d" % i
        if output_stride is not None and current_stride == output_stride:
          layer_stride, layer_rate = 1, rate
          rate *= conv_def.stride
        else:
          layer_stride, layer_rate = conv_def.stride, 1
          current_stride *= conv_def.stride
        if isinstance(conv_def, Conv):
          end_point = end_point_base
          net = slim.conv2d(net, depth(conv_def.depth), conv_def.kernel,
                            stride=conv_def.stride, scope=end_point)
        elif isinstance(conv_def, DepthSepConv):
          end_point = end_point_base + "_depthwise"
          net = slim.separable_conv2d(net, None, conv_def.kernel, depth_multiplier=1,
                                      stride=layer_stride, rate=layer_rate, scope=end_point)
          end_points[end_point] = net
          if end_point == final_endpoint:
            return net, end_points
          end_point = end_point_base + "_pointwise"
          net = slim.conv2d(net, depth(conv_def.depth), [1, 1], stride=1, scope=end_point)
        else:
          raise ValueError("Unknown convolution type %s for layer %d"
                           % (type(conv_def).__name__, i))
        end_points[end_point] = net
        if end_point == final_endpoint:
          return net, end_points
  raise ValueError("Unknown final endpoint %s" % final_endpoint)


def _reduced_kernel_size_for_small_input(input_tensor, kernel_size):
  shape = input_tensor.get_shape().as_list()
  if shape[1] is None or shape[2] is None:
    return kernel_size
  return [min(shape[1], kernel_size[0]), min(shape[2], kernel_size[1])]


def mobilenet_v1(inputs, num_classes=1000, dropout_keep_prob=0.999, is_training=True,
                 min_depth=8, depth_multiplier=1.0, conv_defs=None,
                 prediction_fn=slim.softmax, spatial_squeeze=True, reuse=None,
                 scope="MobilenetV1", global_pool=False):
  """(logits [batch, num_classes], end_points); num_classes 0 or None: the pooled
  features."""
  inputs = ops.convert_to_tensor(inputs)
  input_shape = inputs.get_shape().as_list()
  if len(input_shape) != 4:
    raise ValueError("Invalid input tensor rank, expected 4, was: %d" % len(input_shape))
  with variable_scope.variable_scope(scope, "MobilenetV1", [inputs], reuse=reuse) as sc:
    with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
      net, end_points = mobilenet_v1_base(inputs, scope=sc, min_depth=min_depth,
                                          depth_multiplier=depth_multiplier,
                                          conv_defs=conv_defs)
      with variable_scope.variable_scope("Logits"):
        if global_pool:
          net = math_ops.reduce_mean(net, [1, 2], keepdims=True, name="global_pool")
          end_points["global_pool"] = net
        else:
          kernel_size = _reduced_kernel_size_for_small_input(net, [7, 7])
          net = slim.avg_pool2d(net, kernel_size, padding="VALID", scope="AvgPool_1a")
          end_points["AvgPool_1a"] = net
        if not num_classes:
          return net, end_points
        net = slim.dropout(net, keep_prob=dropout_keep_prob, scope="Dropout_1b")
        logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None,
                             scope="Conv2d_1c_1x1")
        if spatial_squeeze:
          logits = array_ops.squeeze(logits, [1, 2], name="SpatialSqueeze")
      end_points["Logits"] = logits
      if prediction_fn:
        end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
  return logits, end_points


mobilenet_v1.default_image_size = 224


def _wrapped_partial(func, **kwargs):
  partial = functools.partial(func, **kwargs)
  functools.update_wrapper(partial, func)
  return partial


mobilenet_v1_075 = _wrapped_partial(mobilenet_v1, depth_multiplier=0.75)
mobilenet_v1_050 = _wrapped_partial(mobilenet_v1, depth_multiplier=0.50)
mobilenet_v1_025 = _wrapped_partial(mobilenet_v1, depth_multiplier=0.25)


def mobilenet_v1_arg_scope(is_training=True, weight_decay=0.00004, stddev=0.09,
                           regularize_depthwise=False, batch_norm_decay=0.9997,
                           batch_norm_epsilon=0.001,
                           batch_norm_updates_collections=ops.GraphKeys.UPDATE_OPS,
                           normalizer_fn=slim.batch_norm):
  """Batch norm (center and scale) and ReLU6 after every convolution, truncated-normal
  weights, L2 decay on the full convolutions (and the depthwise ones when
  regularize_depthwise)."""
  batch_norm_params = {"center": True, "scale": True, "decay": batch_norm_decay,
                       "epsilon": batch_norm_epsilon,
                       "updates_collections": batch_norm_updates_collections}
  if is_training is not None:
    batch_norm_params["is_training"] = is_training
  weights_init = init_ops.truncated_normal_initializer(stddev=stddev)
  regularizer = slim.l2_regularizer(float(weight_decay))
  depthwise_regularizer = regularizer if regularize_depthwise else None
  with slim.arg_scope([slim.conv2d, slim.separable_conv2d], weights_initializer=weights_init,
                      activation_fn=nn_ops.relu6, normalizer_fn=normalizer_fn):
    with slim.arg_scope([slim.batch_norm], **batch_norm_params):
      with slim.arg_scope([slim.conv2d], weights_regularizer=regularizer):
        with slim.arg_scope([slim.separable_conv2d],
                            weights_regularizer=depthwise_regularizer) as sc:
          return sc
