"""tf.data on recflow: input pipelines as graph values (DT_VARIANT datasets).

`import recflow.compat.v1 as tf; tf.data.Dataset...` builds TensorFlow's
dataset ops (TensorSliceDataset, BatchDatasetV2, MapDataset, ...), which the
session runs with recflow/data's C++ pipeline; iterators are TensorFlow's
(OneShotIterator, IteratorV2 + MakeIterator, IteratorGetNext).
"""

from recflow.data.dataset_ops import AUTOTUNE, Dataset, TextLineDataset, TFRecordDataset
from recflow.data.iterator_ops import (Iterator, make_initializable_iterator,
                                       make_one_shot_iterator)
from recflow.data import experimental
