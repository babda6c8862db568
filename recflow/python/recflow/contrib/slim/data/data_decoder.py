"""slim.data_decoder.DataDecoder: turns one serialized record into named items."""

import abc

__all__ = ["DataDecoder"]


class DataDecoder(abc.ABC):

  @abc.abstractmethod
  def decode(self, data, items):
    """The tensors of `items` (names from list_items()) decoded from `data`."""

  @abc.abstractmethod
  def list_items(self):
    """The names of the items this decoder can give."""
