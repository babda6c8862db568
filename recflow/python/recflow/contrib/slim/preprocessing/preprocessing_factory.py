"""preprocessing_factory: preprocessing functions by name,
fn(image, output_height, output_width, **kwargs) -> float image.

- "lenet": TF-slim's (crop or pad to size, then (x - 128) / 128);
- "digits" (and "cifarnet", "mobilenet_v1*", "resnet_v1*"): bilinear resize to size,
  then scaled to [-1, 1]. TF-slim's inception and vgg preprocessings (random crops,
  color distortion, mean subtraction) are not provided; register your own with
  register_preprocessing.
"""

from recflow.contrib.slim.preprocessing import image_util
from recflow.contrib.slim.preprocessing import lenet_preprocessing
from recflow.framework import dtypes
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops

__all__ = ["get_preprocessing", "register_preprocessing"]


def _resize_and_scale(image, output_height, output_width, is_training=False):
  del is_training
  image = math_ops.cast(image, dtypes.float32)
  image = image_util.resize_bilinear(image, output_height, output_width)
  return gen.sub(gen.real_div(image, 127.5), 1.0)


class _Scaled(object):
  preprocess_image = staticmethod(_resize_and_scale)


_PREPROCESSING = {
    "lenet": lenet_preprocessing,
    "digits": _Scaled,
    "cifarnet": _Scaled,
    "mobilenet_v1": _Scaled,
    "mobilenet_v1_075": _Scaled,
    "mobilenet_v1_050": _Scaled,
    "mobilenet_v1_025": _Scaled,
    "resnet_v1_50": _Scaled,
    "resnet_v1_101": _Scaled,
    "resnet_v1_152": _Scaled,
    "resnet_v1_200": _Scaled,
}


def register_preprocessing(name, preprocess_image, replace=False):
  """preprocess_image(image, output_height, output_width, is_training=...) -> image."""
  if name in _PREPROCESSING and not replace:
    raise ValueError("register_preprocessing: %r is already registered" % name)
  _PREPROCESSING[name] = type("_Registered", (object,),
                              {"preprocess_image": staticmethod(preprocess_image)})


def get_preprocessing(name, is_training=False):
  if name not in _PREPROCESSING:
    raise ValueError("Preprocessing name [%s] was not recognized (known: %s)"
                     % (name, ", ".join(sorted(_PREPROCESSING))))

  def preprocessing_fn(image, output_height, output_width, **kwargs):
    return _PREPROCESSING[name].preprocess_image(image, output_height, output_width,
                                                 is_training=is_training, **kwargs)
  return preprocessing_fn
