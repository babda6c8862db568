"""tf.summary (TF 1.x): summary ops, FileWriter, FileWriterCache and the protos."""

# pylint: disable=unused-import
from recflow.summary.summary import (histogram, merge, merge_all, scalar, tensor_summary,
                                     text)
from recflow.summary.summary_pb import Event, SessionLog, Summary, TaggedRunMetadata
from recflow.summary.writer import FileWriter, FileWriterCache
