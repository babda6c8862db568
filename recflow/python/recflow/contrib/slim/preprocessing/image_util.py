"""Shared image helpers of the preprocessing functions (images [height, width, channels]
with static height and width)."""

from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen


def _static_hw(image, what):
  image = ops.convert_to_tensor(image)
  shape = image.get_shape()
  if shape.ndims != 3 or shape[0].value is None or shape[1].value is None:
    raise ValueError("%s: recflow needs an image [height, width, channels] with a static "
                     "height and width, got %s (%s)" % (what, image.name, shape))
  return image, shape[0].value, shape[1].value


def resize_image_with_crop_or_pad(image, target_height, target_width):
  """The image centered in a target_height x target_width canvas: cropped where larger,
  zero-padded where smaller (tf.image.resize_image_with_crop_or_pad)."""
  image, height, width = _static_hw(image, "resize_image_with_crop_or_pad")
  off_h = max((height - target_height) // 2, 0)
  off_w = max((width - target_width) // 2, 0)
  crop_h, crop_w = min(height, target_height), min(width, target_width)
  if (off_h, off_w, crop_h, crop_w) != (0, 0, height, width):
    image = array_ops.slice(image, [off_h, off_w, 0], [crop_h, crop_w, -1])
  pad_top = max((target_height - height) // 2, 0)
  pad_left = max((target_width - width) // 2, 0)
  if crop_h < target_height or crop_w < target_width:
    image = array_ops.pad(image, [[pad_top, target_height - crop_h - pad_top],
                                  [pad_left, target_width - crop_w - pad_left], [0, 0]])
  return image


def resize_bilinear(image, height, width):
  """A float image resized to height x width with bilinear interpolation (half-pixel
  centers, as tf.image.resize does)."""
  image = ops.convert_to_tensor(image)
  batch = gen.expand_dims(image, 0)
  resized = gen.resize_bilinear(batch, [height, width], align_corners=False,
                                half_pixel_centers=True)
  out = gen.squeeze(resized, squeeze_dims=[0])
  channels = image.get_shape()[-1].value if image.get_shape().ndims == 3 else None
  out.set_shape([height, width, channels])
  return out
