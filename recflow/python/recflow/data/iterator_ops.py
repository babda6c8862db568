"""tf.data.Iterator (TensorFlow 1.15's graph-mode iterator): a resource
handle to an iterator (IteratorV2 / OneShotIterator), with get_next() adding
IteratorGetNext and initializer running MakeIterator."""

import itertools

from recflow.data import structure
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import op_def_library
from recflow.util import nest

_uid = itertools.count()


class Iterator(object):
  """An iterator over the elements of datasets with one element structure."""

  def __init__(self, iterator_resource, initializer, element_structure):
    self._iterator_resource = iterator_resource
    self._initializer = initializer
    self._structure = element_structure

  @staticmethod
  def from_structure(output_types, output_shapes=None, shared_name=None, output_classes=None):
    """An uninitialized iterator for elements of (output_types, output_shapes);
    make_initializer(dataset) gives the op that starts it on a dataset."""
    del output_classes
    if output_shapes is None:
      output_shapes = nest.map_structure(lambda _: None, output_types)
    spec = structure.from_types_and_shapes(output_types, output_shapes)
    handle = op_def_library.apply_op(
        "IteratorV2", shared_name=shared_name or "", container="",
        output_types=structure.flat_types(spec), output_shapes=structure.flat_shapes(spec),
        name="Iterator")
    return Iterator(handle, None, spec)

  @staticmethod
  def from_string_handle(string_handle, output_types, output_shapes=None,
                         output_classes=None):
    """An iterator that reads from whichever iterator string_handle names (fed
    at run time from another iterator's string_handle())."""
    del output_classes
    if output_shapes is None:
      output_shapes = nest.map_structure(lambda _: None, output_types)
    spec = structure.from_types_and_shapes(output_types, output_shapes)
    string_handle = ops.convert_to_tensor(string_handle, dtype=dtypes.string)
    handle = op_def_library.apply_op(
        "IteratorFromStringHandleV2", string_handle=string_handle,
        output_types=structure.flat_types(spec), output_shapes=structure.flat_shapes(spec))
    return Iterator(handle, None, spec)

  @property
  def initializer(self):
    if self._initializer is None:
      raise ValueError("Iterator does not have an initializer: it is one-shot or came from "
                       "from_structure / from_string_handle (use make_initializer(dataset))")
    return self._initializer

  def make_initializer(self, dataset, name=None):
    """The MakeIterator op that (re)starts this iterator on `dataset`."""
    if structure.flat_types(dataset.element_spec) != structure.flat_types(self._structure):
      raise TypeError("Expected output types %r but got dataset with output types %r." %
                      (self.output_types, dataset.output_types))
    with ops.name_scope(name, "make_initializer"):
      return op_def_library.apply_op("MakeIterator", dataset=dataset._variant_tensor,  # pylint: disable=protected-access
                                     iterator=self._iterator_resource)

  def get_next(self, name=None):
    """The next element (a nest of tensors); running it past the end raises
    tf.errors.OutOfRangeError."""
    flat = op_def_library.apply_op(
        "IteratorGetNext", iterator=self._iterator_resource,
        output_types=structure.flat_types(self._structure),
        output_shapes=structure.flat_shapes(self._structure), name=name or "IteratorGetNext")
    return structure.pack(self._structure, list(flat))

  def string_handle(self, name=None):
    return op_def_library.apply_op("IteratorToStringHandle",
                                   resource_handle=self._iterator_resource, name=name)

  @property
  def output_types(self):
    return structure.types(self._structure)

  @property
  def output_shapes(self):
    return structure.shapes(self._structure)

  @property
  def output_classes(self):
    return structure.classes(self._structure)

  @property
  def element_spec(self):
    return self._structure


def make_initializable_iterator(dataset, shared_name=None):
  """An iterator started (and restarted) by running its `initializer`."""
  spec = dataset.element_spec
  with ops.name_scope("Iterator"):
    handle = op_def_library.apply_op(
        "IteratorV2", shared_name=shared_name or "", container="",
        output_types=structure.flat_types(spec), output_shapes=structure.flat_shapes(spec),
        name="Iterator")
    init = op_def_library.apply_op("MakeIterator", dataset=dataset._variant_tensor,  # pylint: disable=protected-access
                                   iterator=handle)
  return Iterator(handle, init, spec)


def make_one_shot_iterator(dataset):
  """An iterator that starts itself on first use (OneShotIterator): the ops
  that build the dataset are copied into its dataset_factory function, so
  they may not depend on placeholders (use an initializable iterator for
  that, as in TensorFlow)."""
  from recflow.data import function_adapter  # pylint: disable=g-import-not-at-top
  spec = dataset.element_spec
  factory = function_adapter.capture_by_value(dataset._variant_tensor, "make_one_shot_iterator")  # pylint: disable=protected-access
  handle = op_def_library.apply_op(
      "OneShotIterator", dataset_factory=factory,
      output_types=structure.flat_types(spec), output_shapes=structure.flat_shapes(spec),
      shared_name="", container="", name="OneShotIterator")
  return Iterator(handle, None, spec)
