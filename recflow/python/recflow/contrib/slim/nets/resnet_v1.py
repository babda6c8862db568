"""ResNet v1 as TF-slim defines it (He et al. 2015, bottleneck units): resnet_v1_50, _101,
_152 and _200. depth_multiplier (never below min_base_depth) makes narrow variants, e.g.
resnet_v1_50(images, depth_multiplier=0.25) for small images or quick tests."""

from recflow.contrib import slim
from recflow.contrib.slim.nets import resnet_utils
from recflow.ops import array_ops
from recflow.ops import clip_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops
from recflow.ops import nn_ops
from recflow.ops import variable_scope

resnet_arg_scope = resnet_utils.resnet_arg_scope


@slim.add_arg_scope
def bottleneck(inputs, depth, depth_bottleneck, stride, rate=1, outputs_collections=None,
               scope=None, use_bounded_activations=False):
  """relu(shortcut + conv1x1(conv3x3(conv1x1(inputs)))): depth_bottleneck channels inside,
  depth out; the shortcut is a strided 1x1 projection when the depth changes."""
  with variable_scope.variable_scope(scope, "bottleneck_v1", [inputs]) as sc:
    depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
    if depth == depth_in:
      shortcut = resnet_utils.subsample(inputs, stride, "shortcut")
    else:
      shortcut = slim.conv2d(inputs, depth, [1, 1], stride=stride,
                             activation_fn=nn_ops.relu6 if use_bounded_activations else None,
                             scope="shortcut")
    residual = slim.conv2d(inputs, depth_bottleneck, [1, 1], stride=1, scope="conv1")
    residual = resnet_utils.conv2d_same(residual, depth_bottleneck, 3, stride, rate=rate,
                                        scope="conv2")
    residual = slim.conv2d(residual, depth, [1, 1], stride=1, activation_fn=None,
                           scope="conv3")
    if use_bounded_activations:
      residual = clip_ops.clip_by_value(residual, -6.0, 6.0)
      output = nn_ops.relu6(gen.add_v2(shortcut, residual))
    else:
      output = nn_ops.relu(gen.add_v2(shortcut, residual))
    return slim.utils.collect_named_outputs(outputs_collections, sc.name, output)


def resnet_v1(inputs, blocks, num_classes=None, is_training=True, global_pool=True,
              output_stride=None, include_root_block=True, spatial_squeeze=True,
              store_non_strided_activations=False, reuse=None, scope=None):
  """(net, end_points): the root block (7x7/2 convolution, 3x3/2 max pool), the blocks,
  global average pooling, and with num_classes 1x1-convolution logits."""
  with variable_scope.variable_scope(scope, "resnet_v1", [inputs], reuse=reuse) as sc:
    end_points_collection = sc.original_name_scope + "_end_points"
    with slim.arg_scope([slim.conv2d, bottleneck, resnet_utils.stack_blocks_dense],
                        outputs_collections=end_points_collection):
      with slim.arg_scope([slim.batch_norm], is_training=is_training):
        net = inputs
        if include_root_block:
          if output_stride is not None:
            if output_stride % 4 != 0:
              raise ValueError("The output_stride needs to be a multiple of 4.")
            output_stride //= 4
          net = resnet_utils.conv2d_same(net, 64, 7, stride=2, scope="conv1")
          net = slim.max_pool2d(net, [3, 3], stride=2, scope="pool1")
        net = resnet_utils.stack_blocks_dense(net, blocks, output_stride,
                                              store_non_strided_activations)
        end_points = slim.utils.convert_collection_to_dict(end_points_collection)
        if global_pool:
          net = math_ops.reduce_mean(net, [1, 2], keepdims=True, name="pool5")
          end_points["global_pool"] = net
        if num_classes:
          net = slim.conv2d(net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None,
                            scope="logits")
          end_points[sc.name + "/logits"] = net
          if spatial_squeeze:
            net = array_ops.squeeze(net, [1, 2], name="SpatialSqueeze")
            end_points[sc.name + "/spatial_squeeze"] = net
          end_points["predictions"] = slim.softmax(net, scope="predictions")
        return net, end_points


resnet_v1.default_image_size = 224


def resnet_v1_block(scope, base_depth, num_units, stride):
  """num_units bottleneck units of base_depth (4 * base_depth out), the last strided."""
  unit = {"depth": base_depth * 4, "depth_bottleneck": base_depth, "stride": 1}
  return resnet_utils.Block(scope, bottleneck,
                            [dict(unit) for _ in range(num_units - 1)] +
                            [dict(unit, stride=stride)])


def _resnet(units, default_scope):
  def net(inputs, num_classes=None, is_training=True, global_pool=True, output_stride=None,
          spatial_squeeze=True, store_non_strided_activations=False, min_base_depth=8,
          depth_multiplier=1, reuse=None, scope=default_scope):
    def depth(d):
      return max(int(d * depth_multiplier), min_base_depth)
    blocks = [resnet_v1_block("block%d" % (i + 1), base_depth=depth(64 * 2 ** i),
                              num_units=n, stride=2 if i < 3 else 1)
              for i, n in enumerate(units)]
    return resnet_v1(inputs, blocks, num_classes, is_training, global_pool=global_pool,
                     output_stride=output_stride, include_root_block=True,
                     spatial_squeeze=spatial_squeeze,
                     store_non_strided_activations=store_non_strided_activations, reuse=reuse,
                     scope=scope)
  net.__name__ = default_scope
  net.__doc__ = ("ResNet-%s v1: bottleneck blocks of %s units (scope %r)."
                 % (default_scope.split("_")[-1], units, default_scope))
  net.default_image_size = resnet_v1.default_image_size
  return net


resnet_v1_50 = _resnet([3, 4, 6, 3], "resnet_v1_50")
resnet_v1_101 = _resnet([3, 4, 23, 3], "resnet_v1_101")
resnet_v1_152 = _resnet([3, 8, 36, 3], "resnet_v1_152")
resnet_v1_200 = _resnet([3, 24, 36, 3], "resnet_v1_200")
