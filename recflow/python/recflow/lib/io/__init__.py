"""File I/O: TFRecord files (tf_record.py)."""
