"""tf.python_io (TF 1.x): TFRecord files."""

# pylint: disable=unused-import
from recflow.lib.io.tf_record import (TFRecordCompressionType, TFRecordOptions, TFRecordWriter,
                                      tf_record_iterator)
