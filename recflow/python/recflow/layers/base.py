"""tf.layers.Layer: a layer owning a variable scope (TensorFlow 1.15's v1 layers).

Variables are made with tf.get_variable in the layer's scope ("dense/kernel"),
regularization losses go to REGULARIZATION_LOSSES and update ops to
UPDATE_OPS. The scope is fixed at the first call: `name` given to the
functional form (`_scope`) is used as is, so a second layer of that name needs
reuse; otherwise the scope is the snake-case class name made unique
("dense", "dense_1", ...), as in TensorFlow.
"""

import re

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import math_ops
from recflow.ops import variable_scope as vs


def _to_snake_case(name):
  s = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
  return re.sub("([a-z])([A-Z])", r"\1_\2", s).lower()


class Layer(object):
  """Base of the tf.layers classes: build(input_shape) makes variables with
  add_weight, call(inputs, ...) computes the output."""

  def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
    scope = kwargs.pop("_scope", None)
    self._reuse = kwargs.pop("_reuse", None)
    activity_regularizer = kwargs.pop("activity_regularizer", None)
    if kwargs:
      raise TypeError("Keyword argument not understood: %s" % ", ".join(sorted(kwargs)))
    if name is not None and not isinstance(name, str):
      raise TypeError("name must be a string, got %r" % (name,))
    self.trainable = trainable
    self.built = False
    self._dtype = None if dtype is None else dtypes.as_dtype(dtype).base_dtype
    self._name = name
    self._base_name = name or _to_snake_case(type(self).__name__)
    self.activity_regularizer = activity_regularizer
    self._trainable_weights = []
    self._non_trainable_weights = []
    self._losses = []
    self._updates = []
    if scope:
      with vs.variable_scope(scope) as captured_scope:
        self._scope = captured_scope
    else:
      self._scope = None

  # --- properties (TF's names) ---
  @property
  def name(self):
    return self._name if self._name is not None else self._base_name

  @property
  def dtype(self):
    return self._dtype

  @property
  def scope_name(self):
    if self._scope is None:
      raise ValueError("No name available for layer scope because the layer \"%s\" has not "
                       "been used yet." % self.name)
    return self._scope.name

  @property
  def trainable_weights(self):
    return list(self._trainable_weights) if self.trainable else []

  @property
  def non_trainable_weights(self):
    if self.trainable:
      return list(self._non_trainable_weights)
    return list(self._trainable_weights) + list(self._non_trainable_weights)

  @property
  def weights(self):
    return self.trainable_weights + self.non_trainable_weights

  trainable_variables = trainable_weights
  non_trainable_variables = non_trainable_weights
  variables = weights

  @property
  def losses(self):
    return list(self._losses)

  @property
  def updates(self):
    return list(self._updates)

  # --- building ---
  def add_weight(self, name, shape, dtype=None, initializer=None, regularizer=None,
                 trainable=True, constraint=None, **kwargs):
    if constraint is not None:
      raise NotImplementedError("variable constraints are not supported by recflow yet")
    if kwargs.pop("partitioner", None) is not None:
      raise NotImplementedError("partitioned layer variables are not supported by recflow yet")
    kwargs.pop("synchronization", None)
    kwargs.pop("aggregation", None)
    use_resource = kwargs.pop("use_resource", None)
    if kwargs:
      raise TypeError("Unknown keyword arguments: %s" % ", ".join(sorted(kwargs)))
    dtype = dtypes.as_dtype(dtype or self._dtype or dtypes.float32)
    existing = set(id(v) for v in ops.get_collection(ops.GraphKeys.REGULARIZATION_LOSSES))
    variable = vs.get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                               regularizer=regularizer, trainable=trainable and self.trainable,
                               use_resource=use_resource)
    for loss in ops.get_collection(ops.GraphKeys.REGULARIZATION_LOSSES):
      if id(loss) not in existing:
        self._losses.append(loss)
    if trainable:
      self._trainable_weights.append(variable)
    else:
      self._non_trainable_weights.append(variable)
    return variable

  def add_loss(self, losses, inputs=None):
    losses = losses if isinstance(losses, (list, tuple)) else [losses]
    for loss in losses:
      self._losses.append(loss)
      ops.add_to_collection(ops.GraphKeys.REGULARIZATION_LOSSES, loss)

  def add_update(self, updates, inputs=None):
    updates = updates if isinstance(updates, (list, tuple)) else [updates]
    for update in updates:
      self._updates.append(update)
      ops.add_to_collection(ops.GraphKeys.UPDATE_OPS, update)

  def build(self, input_shape):
    self.built = True

  def call(self, inputs, **kwargs):
    return inputs

  def compute_output_shape(self, input_shape):
    raise NotImplementedError

  def _set_scope(self):
    if self._scope is None:
      if self._reuse:
        with vs.variable_scope(self._base_name) as captured_scope:
          self._scope = captured_scope
      else:
        with vs.variable_scope(None, default_name=self._base_name) as captured_scope:
          self._scope = captured_scope
      if self._name is None:
        self._name = self._scope.name.split("/")[-1]

  def __call__(self, inputs, *args, **kwargs):
    self._set_scope()
    reuse = True if self.built else self._reuse
    with vs.variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False):
      with ops.name_scope(self._scope.original_name_scope):
        if not isinstance(inputs, ops.Tensor):
          inputs = ops.convert_to_tensor(inputs, name="inputs")
        if self._dtype is None:
          self._dtype = (inputs.dtype.base_dtype if inputs.dtype.is_floating
                         else dtypes.float32)
        if not self.built:
          self.build(inputs.get_shape())
          self.built = True
        outputs = self.call(inputs, *args, **kwargs)
        if self.activity_regularizer is not None:
          with ops.name_scope("ActivityRegularizer"):
            loss = self.activity_regularizer(outputs)
            batch = math_ops.cast(array_ops.shape(outputs)[0], loss.dtype)
            self.add_loss(math_ops.truediv(loss, batch))
    return outputs

  def apply(self, inputs, *args, **kwargs):
    return self.__call__(inputs, *args, **kwargs)
