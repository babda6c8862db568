"""tf.io (TF 1.15 names): tf.Example parsing, CSV decoding, TFRecord files."""

# pylint: disable=unused-import
from recflow.lib.io.tf_record import (TFRecordCompressionType, TFRecordOptions, TFRecordWriter,
                                      tf_record_iterator)
from recflow.ops.parsing_ops import (FixedLenFeature, FixedLenSequenceFeature, VarLenFeature,
                                     decode_csv, parse_example, parse_single_example)
