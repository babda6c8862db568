"""tf.data (TF 1.x names): datasets, iterators, tf.data.experimental.AUTOTUNE."""

# pylint: disable=unused-import
from recflow.data import experimental
from recflow.data.dataset_ops import Dataset, DatasetV1, TextLineDataset, TFRecordDataset
from recflow.data.iterator_ops import (Iterator, make_initializable_iterator,
                                       make_one_shot_iterator)
