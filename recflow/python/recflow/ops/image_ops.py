"""tf.image (TF 1.x names): bilinear resizing, PNG/JPEG decoding and encoding,
dtype conversion and standardization; and tf.nn.lrn, local response
normalization.

The ops are recflow's C++ ones (TensorFlow's ResizeBilinear, DecodePng,
DecodeJpeg, DecodeImage, EncodePng, EncodeJpeg, LRN); this module adds
TensorFlow's Python conveniences around them: 3-D images for resizing,
resize methods by name or number, convert_image_dtype's scaling.
"""

import numbers

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops


class ResizeMethod(object):
  """tf.image.ResizeMethod (TF 1.x values). recflow resizes bilinearly only."""
  BILINEAR = 0
  NEAREST_NEIGHBOR = 1
  BICUBIC = 2
  AREA = 3


_METHOD_NAMES = {ResizeMethod.BILINEAR: "bilinear", ResizeMethod.NEAREST_NEIGHBOR: "nearest",
                 ResizeMethod.BICUBIC: "bicubic", ResizeMethod.AREA: "area"}


def _method_name(method):
  if isinstance(method, str):
    return method.lower()
  return _METHOD_NAMES.get(method, str(method))


def _as_batch(images, op_name):
  """images as a 4-D batch, and whether it was a single 3-D image."""
  images = ops.convert_to_tensor(images, name="images")
  rank = images.get_shape().ndims
  if rank is None:
    raise ValueError("tf.image.%s: the rank of images must be known (3-D or 4-D)" % op_name)
  if rank not in (3, 4):
    raise ValueError("tf.image.%s: images must be 3-D [height, width, channels] or 4-D "
                     "[batch, height, width, channels], got shape %s"
                     % (op_name, images.get_shape()))
  if rank == 3:
    return array_ops.expand_dims(images, 0), True
  return images, False


def _size_tensor(size):
  return ops.convert_to_tensor(size, dtype=dtypes.int32, name="size")


def resize_bilinear(images, size, align_corners=False, half_pixel_centers=False, name=None):
  """ResizeBilinear: images [batch, h, w, c] (or one 3-D image) to size
  [new_height, new_width]; the result is float32."""
  with ops.name_scope(name, "ResizeBilinear", [images, size]) as scope:
    batch, single = _as_batch(images, "resize_bilinear")
    out = gen.resize_bilinear(batch, _size_tensor(size), align_corners=align_corners,
                              half_pixel_centers=half_pixel_centers,
                              name=None if single else scope)
    return array_ops.squeeze(out, [0], name=scope) if single else out


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
                  preserve_aspect_ratio=False, name=None):
  """tf.image.resize_images (TF 1.x): bilinear only; other methods raise
  NotImplementedError naming them. Like TensorFlow's, returns images as
  they are when their static size already is `size`."""
  method_name = _method_name(method)
  if method_name != "bilinear":
    raise NotImplementedError("tf.image.resize_images(method=%r): recflow resizes with "
                              "'bilinear' only" % (method_name,))
  if preserve_aspect_ratio:
    raise NotImplementedError("tf.image.resize_images(preserve_aspect_ratio=True) is not "
                              "supported by recflow")
  with ops.name_scope(name, "resize", [images, size]) as scope:
    images = ops.convert_to_tensor(images, name="images")
    shape = images.get_shape()
    if (shape.ndims in (3, 4) and isinstance(size, (list, tuple)) and
        all(isinstance(s, numbers.Integral) for s in size)):
      dims = shape.as_list()[-3:-1]
      if dims == list(size):
        return images
    return resize_bilinear(images, size, align_corners=align_corners, name=scope)


def resize(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
           preserve_aspect_ratio=False, name=None):
  """tf.compat.v1.image.resize: resize_images."""
  return resize_images(images, size, method=method, align_corners=align_corners,
                       preserve_aspect_ratio=preserve_aspect_ratio, name=name)


def decode_png(contents, channels=0, dtype=dtypes.uint8, name=None):
  return gen.decode_png(contents, channels=channels, dtype=dtypes.as_dtype(dtype), name=name)


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True,
                try_recover_truncated=False, acceptable_fraction=1, dct_method="", name=None):
  return gen.decode_jpeg(contents, channels=channels, ratio=ratio,
                         fancy_upscaling=fancy_upscaling,
                         try_recover_truncated=try_recover_truncated,
                         acceptable_fraction=float(acceptable_fraction), dct_method=dct_method,
                         name=name)


def decode_image(contents, channels=None, dtype=dtypes.uint8, name=None, expand_animations=True):
  """PNG or JPEG, told apart by the first bytes; dtype float32 scales to
  [0, 1]. GIF and BMP are refused when the op runs."""
  return gen.decode_image(contents, channels=0 if channels is None else channels,
                          dtype=dtypes.as_dtype(dtype), expand_animations=expand_animations,
                          name=name)


def encode_png(image, compression=-1, name=None):
  # Converted first, so that a NumPy uint16 image stays uint16.
  image = ops.convert_to_tensor(image, name="image")
  return gen.encode_png(image, compression=compression, name=name)


# pylint: disable=redefined-builtin
def encode_jpeg(image, format="", quality=95, progressive=False, optimize_size=False,
                chroma_downsampling=True, density_unit="in", x_density=300, y_density=300,
                xmp_metadata="", name=None):
  image = ops.convert_to_tensor(image, dtype=dtypes.uint8, name="image")
  return gen.encode_jpeg(image, format=format, quality=quality, progressive=progressive,
                         optimize_size=optimize_size, chroma_downsampling=chroma_downsampling,
                         density_unit=density_unit, x_density=x_density, y_density=y_density,
                         xmp_metadata=xmp_metadata, name=name)


def convert_image_dtype(image, dtype, saturate=False, name=None):
  """TensorFlow's scaling: integers span [0, MAX] of their type, floats
  [0, 1). Integer to integer shifts the range (uint8 255 -> uint16 65280),
  integer to float divides by MAX, float to integer multiplies by MAX + 0.5
  and truncates (saturating first with saturate=True)."""
  image = ops.convert_to_tensor(image, name="image")
  dtype = dtypes.as_dtype(dtype)
  if not dtype.is_floating and not dtype.is_integer:
    raise AttributeError("dtype must be either floating point or integer")
  if dtype == image.dtype:
    return array_ops.identity(image, name=name)
  with ops.name_scope(name, "convert_image", [image]) as name:
    if image.dtype.is_integer and dtype.is_integer:
      # The arithmetic runs in int64 (recflow's Mul and FloorDiv take int32
      # and int64 only), which holds every product here.
      scale_in, scale_out = image.dtype.max, dtype.max
      wide = math_ops.cast(image, dtypes.int64)
      if scale_in > scale_out:
        scale = (scale_in + 1) // (scale_out + 1)
        scaled = math_ops.floordiv(wide, constant_op.constant(scale, dtype=dtypes.int64))
      else:
        scale = (scale_out + 1) // (scale_in + 1)
        scaled = math_ops.multiply(wide, constant_op.constant(scale, dtype=dtypes.int64))
      if saturate:
        return math_ops.saturate_cast(scaled, dtype, name=name)
      return math_ops.cast(scaled, dtype, name=name)
    if image.dtype.is_floating and dtype.is_floating:
      return math_ops.cast(image, dtype, name=name)
    if image.dtype.is_integer:  # to float
      cast = math_ops.cast(image, dtype)
      scale = 1. / image.dtype.max
      return math_ops.multiply(cast, constant_op.constant(scale, dtype=dtype), name=name)
    scale = dtype.max + 0.5  # float to integer
    scaled = math_ops.multiply(image, constant_op.constant(scale, dtype=image.dtype))
    if saturate:
      return math_ops.saturate_cast(scaled, dtype, name=name)
    return math_ops.cast(scaled, dtype, name=name)


def per_image_standardization(image, name=None):
  """(image - mean) / max(stddev, 1 / sqrt(pixels)) over each image's last
  three dimensions, in float32 (integer images are cast first)."""
  with ops.name_scope(name, "per_image_standardization", [image]) as scope:
    image = ops.convert_to_tensor(image, name="image")
    rank = image.get_shape().ndims
    if rank not in (3, 4):
      raise ValueError("per_image_standardization: image must be 3-D or 4-D, got shape %s"
                       % image.get_shape())
    if not image.dtype.is_floating:
      image = math_ops.cast(image, dtypes.float32)
    axes = [-1, -2, -3]
    dims = image.get_shape().as_list()[-3:]
    if any(d is None for d in dims):
      raise ValueError("per_image_standardization: the height, width and channels must be "
                       "known, got shape %s" % image.get_shape())
    num_pixels = dims[0] * dims[1] * dims[2]
    mean = math_ops.reduce_mean(image, axis=axes, keepdims=True)
    variance = math_ops.reduce_mean(math_ops.square(image - mean), axis=axes, keepdims=True)
    stddev = math_ops.sqrt(variance)
    min_stddev = constant_op.constant(1.0 / num_pixels ** 0.5, dtype=image.dtype)
    adjusted = math_ops.maximum(stddev, min_stddev)
    return math_ops.divide(image - mean, adjusted, name=scope)


def lrn(input, depth_radius=5, bias=1, alpha=1, beta=0.5, name=None):
  """tf.nn.lrn: sqr_sum = sum(input[..., d - r : d + r + 1] ** 2);
  output = input / (bias + alpha * sqr_sum) ** beta."""
  input = ops.convert_to_tensor(input, name="input")
  return gen.lrn(input, depth_radius=depth_radius, bias=float(bias), alpha=float(alpha),
                 beta=float(beta), name=name)


local_response_normalization = lrn
