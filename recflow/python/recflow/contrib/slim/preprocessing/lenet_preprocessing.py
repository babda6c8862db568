"""LeNet's preprocessing as TF-slim has it: the image centered in an output_height x
output_width canvas (cropped or zero-padded), then (x - 128) / 128."""

from recflow.contrib.slim.preprocessing import image_util
from recflow.framework import dtypes
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops


def preprocess_image(image, output_height, output_width, is_training):
  del is_training
  image = math_ops.cast(image, dtypes.float32)
  image = image_util.resize_image_with_crop_or_pad(image, output_height, output_width)
  return gen.real_div(gen.sub(image, 128.0), 128.0)
