"""slim.data_provider.DataProvider: named items of a data set as tensors."""

import abc

__all__ = ["DataProvider"]


class DataProvider(abc.ABC):
  """Holds {item name: tensor} and a number of samples."""

  def __init__(self, items_to_tensors, num_samples):
    self._items_to_tensors = items_to_tensors
    self._num_samples = num_samples

  def get(self, items):
    """The tensors of the named items, in order."""
    unknown = [i for i in items if i not in self._items_to_tensors]
    if unknown:
      raise ValueError("Items %s are not provided; this provider has %s"
                       % (unknown, sorted(self._items_to_tensors)))
    return [self._items_to_tensors[i] for i in items]

  def list_items(self):
    return list(self._items_to_tensors.keys())

  def num_samples(self):
    return self._num_samples
