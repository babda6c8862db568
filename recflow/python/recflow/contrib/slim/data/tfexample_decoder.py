"""slim.tfexample_decoder: items decoded from serialized tf.Example records.

    keys_to_features = {
        "image/encoded": tf.FixedLenFeature((), tf.string, default_value=""),
        "image/format": tf.FixedLenFeature((), tf.string, default_value="png"),
        "image/class/label": tf.FixedLenFeature([], tf.int64, default_value=0)}
    items_to_handlers = {
        "image": tfexample_decoder.Image(shape=[8, 8, 1], channels=1),
        "label": tfexample_decoder.Tensor("image/class/label")}
    decoder = tfexample_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)

Image decodes PNG and JPEG (the kind is read from the bytes, as tf.image.decode_image
does; the format feature is parsed but not needed). TF's 'raw' image format is not
supported.
"""

import abc

from recflow.contrib.slim.data import data_decoder
from recflow.framework import dtypes
from recflow.framework import sparse_tensor
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import parsing_ops
from recflow.ops import sparse_ops

__all__ = ["ItemHandler", "ItemHandlerCallback", "Image", "Tensor", "TFExampleDecoder"]


class ItemHandler(abc.ABC):
  """Turns the parsed features named by keys into one item."""

  def __init__(self, keys):
    if not isinstance(keys, (tuple, list)):
      keys = [keys]
    self._keys = list(keys)

  @property
  def keys(self):
    return self._keys

  @abc.abstractmethod
  def tensors_to_item(self, keys_to_tensors):
    """The item from {key: parsed tensor}."""


class ItemHandlerCallback(ItemHandler):
  """An item computed by func({key: parsed tensor})."""

  def __init__(self, keys, func):
    super(ItemHandlerCallback, self).__init__(keys)
    self._func = func

  def tensors_to_item(self, keys_to_tensors):
    return self._func(keys_to_tensors)


class Tensor(ItemHandler):
  """The feature tensor_key as a dense tensor, reshaped to shape (or to the values of the
  features shape_keys) when given; a VarLenFeature's missing values become
  default_value."""

  def __init__(self, tensor_key, shape_keys=None, shape=None, default_value=0):
    if shape_keys and shape is not None:
      raise ValueError("Cannot specify both shape_keys and shape parameters.")
    if shape_keys and not isinstance(shape_keys, list):
      shape_keys = [shape_keys]
    self._tensor_key = tensor_key
    self._shape_keys = shape_keys
    self._shape = shape
    self._default_value = default_value
    keys = [tensor_key] + (shape_keys or [])
    super(Tensor, self).__init__(keys)

  def tensors_to_item(self, keys_to_tensors):
    tensor = keys_to_tensors[self._tensor_key]
    shape = self._shape
    if self._shape_keys:
      parts = []
      for key in self._shape_keys:
        value = keys_to_tensors[key]
        if isinstance(value, sparse_tensor.SparseTensor):
          value = sparse_ops.sparse_tensor_to_dense(value)
        parts.append(array_ops.reshape(value, [-1]))
      shape = array_ops.concat(parts, 0) if len(parts) > 1 else parts[0]
    if isinstance(tensor, sparse_tensor.SparseTensor):
      tensor = sparse_ops.sparse_tensor_to_dense(tensor, self._default_value)
    if shape is not None:
      tensor = array_ops.reshape(tensor, shape)
    return tensor


class Image(ItemHandler):
  """A PNG or JPEG image (image_key, default "image/encoded") decoded to [height, width,
  channels] of dtype (uint8 or uint16), reshaped to shape when given; repeated: a list of
  images decoded to [n, height, width, channels]."""

  def __init__(self, image_key=None, format_key=None, shape=None, channels=3,
               dtype=dtypes.uint8, repeated=False, dct_method=""):
    image_key = image_key or "image/encoded"
    format_key = format_key or "image/format"
    super(Image, self).__init__([image_key, format_key])
    self._image_key = image_key
    self._format_key = format_key
    self._shape = shape
    self._channels = channels
    self._dtype = dtypes.as_dtype(dtype)
    if self._dtype not in (dtypes.uint8, dtypes.uint16):
      raise ValueError("Image: dtype must be uint8 or uint16, got %s" % self._dtype.name)
    self._repeated = repeated
    del dct_method

  def _decode(self, image_buffer):
    image = gen.decode_image(image_buffer, channels=self._channels, dtype=self._dtype,
                             expand_animations=False)
    if self._channels:
      image.set_shape([None, None, self._channels])
    if self._shape is not None:
      image = array_ops.reshape(image, self._shape)
    return image

  def tensors_to_item(self, keys_to_tensors):
    image_buffer = keys_to_tensors[self._image_key]
    if self._repeated:
      raise NotImplementedError("tfexample_decoder.Image(repeated=True) is not supported by "
                                "recflow")
    return self._decode(image_buffer)


class TFExampleDecoder(data_decoder.DataDecoder):
  """Parses a serialized tf.Example with keys_to_features and gives each item of
  items_to_handlers."""

  def __init__(self, keys_to_features, items_to_handlers):
    for item, handler in items_to_handlers.items():
      missing = [k for k in handler.keys if k not in keys_to_features]
      if missing:
        raise ValueError("TFExampleDecoder: item %r needs the features %s, which "
                         "keys_to_features lacks" % (item, missing))
    self._keys_to_features = keys_to_features
    self._items_to_handlers = items_to_handlers

  def list_items(self):
    return list(self._items_to_handlers.keys())

  def decode(self, serialized_example, items=None):
    """The tensors of items (all when None) of one serialized example."""
    example = parsing_ops.parse_single_example(serialized_example, self._keys_to_features)
    items = self.list_items() if items is None else items
    outputs = []
    for item in items:
      if item not in self._items_to_handlers:
        raise ValueError("TFExampleDecoder: no item %r (it has %s)"
                         % (item, sorted(self._items_to_handlers)))
      handler = self._items_to_handlers[item]
      outputs.append(handler.tensors_to_item({k: example[k] for k in handler.keys}))
    return outputs
