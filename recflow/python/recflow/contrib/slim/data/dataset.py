"""slim.dataset.Dataset: where a data set's records are and how to decode them."""

__all__ = ["Dataset"]


class Dataset(object):
  """data_sources (a file pattern or a list of files or patterns), reader (None or
  tf.data.TFRecordDataset: TFRecord files), decoder (a DataDecoder), num_samples and
  items_to_descriptions; further keyword arguments (num_classes, labels_to_names, ...) become
  attributes."""

  def __init__(self, data_sources, reader, decoder, num_samples, items_to_descriptions,
               **kwargs):
    kwargs["data_sources"] = data_sources
    kwargs["reader"] = reader
    kwargs["decoder"] = decoder
    kwargs["num_samples"] = num_samples
    kwargs["items_to_descriptions"] = items_to_descriptions
    self.__dict__.update(kwargs)
