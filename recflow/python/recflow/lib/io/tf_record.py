"""TFRecord files from Python: tf.io.TFRecordWriter, tf.io.tf_record_iterator
(also tf.python_io.*), TFRecordOptions and TFRecordCompressionType.

The bytes are written and read by recflow's C++ record I/O (core/record_io.h,
bound in recflow/python/py_record_io.cc): TensorFlow's framing (uint64 length,
masked crc32c of the length, data, masked crc32c of the data), so files go
both ways between recflow and TensorFlow. Reading checks every crc: a corrupt
or truncated file raises tf.errors.DataLossError naming the path and the
offset. Compression (GZIP, ZLIB) is not supported: asking for it raises
NotImplementedError.
"""

from recflow import _pywrap


class TFRecordCompressionType(object):
  """The compression types of TFRecord files (only NONE in recflow)."""
  NONE = 0
  ZLIB = 1
  GZIP = 2


_COMPRESSION_NAMES = {
    TFRecordCompressionType.NONE: "",
    TFRecordCompressionType.ZLIB: "ZLIB",
    TFRecordCompressionType.GZIP: "GZIP",
}


class TFRecordOptions(object):
  """Options of a TFRecord file. recflow reads and writes uncompressed files
  only; the zlib tuning arguments are accepted for source compatibility."""

  compression_type_map = {
      TFRecordCompressionType.ZLIB: "ZLIB",
      TFRecordCompressionType.GZIP: "GZIP",
      TFRecordCompressionType.NONE: "",
  }

  def __init__(self, compression_type=None, flush_mode=None, input_buffer_size=None,
               output_buffer_size=None, window_bits=None, compression_level=None,
               compression_method=None, mem_level=None, compression_strategy=None):
    # pylint: disable=unused-argument
    if compression_type is None:
      compression_type = ""
    if isinstance(compression_type, int):
      if compression_type not in _COMPRESSION_NAMES:
        raise ValueError("Not a valid compression_type: %r" % compression_type)
      compression_type = _COMPRESSION_NAMES[compression_type]
    if compression_type not in ("", "ZLIB", "GZIP"):
      raise ValueError('compression_type must be "", "ZLIB" or "GZIP", got %r' %
                       (compression_type,))
    self.compression_type = compression_type

  @classmethod
  def get_compression_type_string(cls, options):
    """"", "ZLIB" or "GZIP" for options given as TFRecordOptions, a type or a
    string (None: "")."""
    if not options:
      return ""
    if isinstance(options, TFRecordOptions):
      return options.compression_type
    return TFRecordOptions(options).compression_type


def _check_uncompressed(options, what):
  compression = TFRecordOptions.get_compression_type_string(options)
  if compression:
    raise NotImplementedError(
        "%s: recflow reads and writes uncompressed TFRecord files only; %s compression is "
        "not supported" % (what, compression))


def _path(path):
  if isinstance(path, bytes):
    return path.decode("utf-8")
  if hasattr(path, "__fspath__"):
    return path.__fspath__()
  if not isinstance(path, str):
    raise TypeError("path must be a str, got %s" % type(path).__name__)
  return path


def _as_bytes(record):
  if isinstance(record, bytes):
    return record
  if isinstance(record, (bytearray, memoryview)):
    return bytes(record)
  if isinstance(record, str):
    return record.encode("utf-8")
  raise TypeError("a record is bytes (or str, written as UTF-8), got %s" %
                  type(record).__name__)


def tf_record_iterator(path, options=None):
  """Yields the records of the TFRecord file at `path` as bytes.

  Raises tf.errors.NotFoundError when the file does not exist and
  tf.errors.DataLossError for a corrupt or truncated record (naming the path
  and the offset)."""
  _check_uncompressed(options, "tf_record_iterator")
  reader = _pywrap.RecordReader(_path(path))
  while True:
    record = reader.read()
    if record is None:
      return
    yield record


class TFRecordWriter(object):
  """Writes records to a TFRecord file (created or truncated), as TensorFlow's.

    with tf.io.TFRecordWriter(path) as w:
      w.write(example.SerializeToString())

  Not thread-safe. write/flush after close raise ValueError; close twice is
  harmless."""

  def __init__(self, path, options=None):
    _check_uncompressed(options, "TFRecordWriter")
    self._writer = _pywrap.RecordWriter(_path(path))

  def __enter__(self):
    return self

  def __exit__(self, exc_type, exc_value, traceback):
    self.close()

  def write(self, record):
    """Appends one record (bytes)."""
    self._writer.write(_as_bytes(record))

  def flush(self):
    """Pushes what was written to the file."""
    self._writer.flush()

  def close(self):
    """Flushes and closes the file."""
    self._writer.close()
