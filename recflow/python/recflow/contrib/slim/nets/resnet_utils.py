"""Building blocks of TF-slim's ResNets: Block, conv2d_same, subsample, stack_blocks_dense
and resnet_arg_scope."""

import collections

from recflow.contrib import slim
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import nn_ops
from recflow.ops import variable_scope


class Block(collections.namedtuple("Block", ["scope", "unit_fn", "args"])):
  """A ResNet block: unit_fn applied once per dict of keyword arguments in args, in scope
  "<scope>/unit_<i>"."""


def subsample(inputs, factor, scope=None):
  """inputs sampled every factor pixels (a 1x1 max pool of stride factor)."""
  if factor == 1:
    return inputs
  return slim.max_pool2d(inputs, [1, 1], stride=factor, scope=scope)


def conv2d_same(inputs, num_outputs, kernel_size, stride, rate=1, scope=None):
  """A convolution whose output size does not depend on the input's parity: with stride >
  1, the input is padded explicitly (kernel_size - 1 split evenly, the extra one after)
  and convolved VALID."""
  if stride == 1:
    return slim.conv2d(inputs, num_outputs, kernel_size, stride=1, rate=rate, padding="SAME",
                       scope=scope)
  effective = kernel_size + (kernel_size - 1) * (rate - 1)
  pad_total = effective - 1
  pad_beg = pad_total // 2
  pad_end = pad_total - pad_beg
  inputs = array_ops.pad(inputs, [[0, 0], [pad_beg, pad_end], [pad_beg, pad_end], [0, 0]])
  return slim.conv2d(inputs, num_outputs, kernel_size, stride=stride, rate=rate,
                     padding="VALID", scope=scope)


@slim.add_arg_scope
def stack_blocks_dense(net, blocks, output_stride=None, store_non_strided_activations=False,
                       outputs_collections=None):
  """The blocks applied in turn. output_stride (None: the nominal stride) turns the strides
  past it into atrous rates so the output keeps that resolution."""
  current_stride = 1
  rate = 1
  for block in blocks:
    with variable_scope.variable_scope(block.scope, "block", [net]) as sc:
      block_stride = 1
      for i, unit in enumerate(block.args):
        if store_non_strided_activations and i == len(block.args) - 1:
          block_stride = unit.get("stride", 1)
          unit = dict(unit, stride=1)
        with variable_scope.variable_scope("unit_%d" % (i + 1), values=[net]):
          if output_stride is not None and current_stride == output_stride:
            net = block.unit_fn(net, rate=rate, **dict(unit, stride=1))
            rate *= unit.get("stride", 1)
          else:
            net = block.unit_fn(net, rate=1, **unit)
            current_stride *= unit.get("stride", 1)
            if output_stride is not None and current_stride > output_stride:
              raise ValueError("The target output_stride cannot be reached.")
      net = slim.utils.collect_named_outputs(outputs_collections, sc.name, net)
      if output_stride is not None and current_stride == output_stride:
        rate *= block_stride
      else:
        net = subsample(net, block_stride)
        current_stride *= block_stride
        if output_stride is not None and current_stride > output_stride:
          raise ValueError("The target output_stride cannot be reached.")
  if output_stride is not None and current_stride != output_stride:
    raise ValueError("The target output_stride cannot be reached.")
  return net


def resnet_arg_scope(weight_decay=0.0001, batch_norm_decay=0.997, batch_norm_epsilon=1e-5,
                     batch_norm_scale=True, activation_fn=nn_ops.relu, use_batch_norm=True,
                     batch_norm_updates_collections=ops.GraphKeys.UPDATE_OPS):
  """He-initialized, L2-decayed convolutions followed by batch norm and activation_fn; SAME
  max pooling."""
  batch_norm_params = {"decay": batch_norm_decay, "epsilon": batch_norm_epsilon,
                       "scale": batch_norm_scale,
                       "updates_collections": batch_norm_updates_collections, "fused": None}
  with slim.arg_scope([slim.conv2d],
                      weights_regularizer=slim.l2_regularizer(float(weight_decay)),
                      weights_initializer=slim.variance_scaling_initializer(),
                      activation_fn=activation_fn,
                      normalizer_fn=slim.batch_norm if use_batch_norm else None,
                      normalizer_params=batch_norm_params):
    with slim.arg_scope([slim.batch_norm], **batch_norm_params):
      with slim.arg_scope([slim.max_pool2d], padding="SAME") as arg_sc:
        return arg_sc
