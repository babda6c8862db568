"""tf.summary: summary ops, FileWriter and the event protos (docs/python.md)."""
