"""recflow.data: input pipelines.

- tf.data on recflow: input pipelines as graph values (DT_VARIANT datasets).
  `import recflow.compat.v1 as tf; tf.data.Dataset...` builds TensorFlow's
  dataset ops (TensorSliceDataset, BatchDatasetV2, MapDataset, ...), which the
  session runs with recflow/data's C++ pipeline; iterators are TensorFlow's
  (OneShotIterator, IteratorV2 + MakeIterator, IteratorGetNext).
- recflow's own input functions: parse_criteo, parse_libsvm and parse_csv
  (parsers.py) run recflow's C++ text parsers as graph ops over a batch of
  lines, e.g. the elements of TextLineDataset(files).batch(4096) or a string
  placeholder.
"""

from recflow.data.dataset_ops import AUTOTUNE, Dataset, TextLineDataset, TFRecordDataset
from recflow.data.iterator_ops import (Iterator, make_initializable_iterator,
                                       make_one_shot_iterator)
from recflow.data import experimental
from recflow.data.parsers import (CsvColumn, parse_criteo, parse_csv, parse_libsvm,  # noqa: F401
                                  to_sparse_tensors)
