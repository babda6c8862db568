"""slim.dataset_data_provider.DatasetDataProvider: a Dataset's items as tensors, read by a
recflow tf.data pipeline.

TF-slim read records with queue runners; recflow has no queues, so the provider builds a
TFRecordDataset over the data sources, shuffled (buffer common_queue_capacity), repeated
num_epochs times (None: forever) and decoded by the dataset's decoder:

    provider = slim.dataset_data_provider.DatasetDataProvider(dataset, shuffle=True)
    image, label = provider.get(["image", "label"])      # one example, as in TF-slim

What TF-slim did next with tf.train.batch -- preprocess each example, then batch -- is
done inside the pipeline (a recflow addition, since tf.train.batch needs queues):

    images, labels = provider.get_batch(["image", "label"], batch_size=32,
                                        preprocess_fn=lambda image, label: (
                                            preprocess(image), label))

Each get_batch call (or each get_next() of batch_iterator()) gives a new batch, so
model_deploy's clones can each take their own.
"""

import glob

from recflow.contrib.slim.data import data_provider
from recflow.data import dataset_ops
from recflow.framework import ops

__all__ = ["DatasetDataProvider"]


def _files(data_sources):
  sources = [data_sources] if isinstance(data_sources, str) else list(data_sources)
  files = []
  for source in sources:
    if any(c in source for c in "*?["):
      matched = sorted(glob.glob(source))
      if not matched:
        raise ValueError("DatasetDataProvider: no file matches %r" % source)
      files.extend(matched)
    else:
      files.append(source)
  if not files:
    raise ValueError("DatasetDataProvider: the dataset has no data_sources")
  return files


class DatasetDataProvider(data_provider.DataProvider):
  """Reads `dataset` (a slim Dataset of TFRecord files) num_epochs times (None: forever),
  shuffled when `shuffle` with a buffer of common_queue_capacity records."""

  def __init__(self, dataset, num_readers=1, reader_kwargs=None, shuffle=True,
               num_epochs=None, common_queue_capacity=256, common_queue_min=128,
               record_key="record_key", seed=None, scope=None):
    del num_readers, common_queue_min, record_key
    reader = getattr(dataset, "reader", None)
    if reader not in (None, dataset_ops.TFRecordDataset) and \
       getattr(reader, "__name__", "") not in ("TFRecordReader", "TFRecordDataset"):
      raise NotImplementedError("DatasetDataProvider: recflow reads TFRecord files only "
                                "(reader None or tf.data.TFRecordDataset), got %r" % (reader,))
    self._dataset = dataset
    self._files = _files(dataset.data_sources)
    self._reader_kwargs = dict(reader_kwargs or {})
    self._shuffle = shuffle
    self._num_epochs = num_epochs
    self._buffer = max(1, int(common_queue_capacity))
    self._seed = seed
    self._scope = scope
    self._items = list(dataset.decoder.list_items())
    self._single = None
    super(DatasetDataProvider, self).__init__({}, dataset.num_samples)

  def _records(self):
    records = dataset_ops.TFRecordDataset(self._files, **self._reader_kwargs)
    if self._shuffle:
      records = records.shuffle(self._buffer, seed=self._seed)
    return records.repeat(self._num_epochs)

  def _decode_fn(self, items, preprocess_fn=None):
    decoder = self._dataset.decoder

    def decode(serialized):
      tensors = decoder.decode(serialized, items)
      if preprocess_fn is not None:
        tensors = preprocess_fn(*tensors)
        if not isinstance(tensors, (list, tuple)):
          tensors = (tensors,)
      return tuple(tensors)
    return decode

  def get(self, items):
    """One example's tensors of the named items (the same tensors on every call, as
    TF-slim's provider gives)."""
    unknown = [i for i in items if i not in self._items]
    if unknown:
      raise ValueError("Items %s are not provided; the dataset's decoder gives %s"
                       % (unknown, self._items))
    if self._single is None:
      with ops.name_scope(self._scope, "parallel_read"):
        pipeline = self._records().map(self._decode_fn(self._items))
        values = pipeline.make_one_shot_iterator().get_next()
      self._single = dict(zip(self._items, values))
    return [self._single[i] for i in items]

  def list_items(self):
    return list(self._items)

  def batch_iterator(self, items, batch_size, preprocess_fn=None, drop_remainder=False,
                     num_parallel_calls=None, prefetch=2):
    """An iterator over batches of the named items, each example passed through
    preprocess_fn(*item_tensors) -> tuple first."""
    unknown = [i for i in items if i not in self._items]
    if unknown:
      raise ValueError("Items %s are not provided; the dataset's decoder gives %s"
                       % (unknown, self._items))
    with ops.name_scope(self._scope, "batch_read"):
      pipeline = self._records().map(self._decode_fn(list(items), preprocess_fn),
                                     num_parallel_calls=num_parallel_calls)
      pipeline = pipeline.batch(batch_size, drop_remainder=drop_remainder)
      if prefetch:
        pipeline = pipeline.prefetch(prefetch)
      return pipeline.make_one_shot_iterator()

  def get_batch(self, items, batch_size, preprocess_fn=None, drop_remainder=False,
                num_parallel_calls=None):
    """The tensors of one batch of the named items ([batch_size, ...] each)."""
    values = self.batch_iterator(items, batch_size, preprocess_fn, drop_remainder,
                                 num_parallel_calls).get_next()
    return list(values) if isinstance(values, (list, tuple)) else [values]
