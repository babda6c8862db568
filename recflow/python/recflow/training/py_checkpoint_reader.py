"""Reading V2 checkpoints (tensor bundles) from Python: tf.train.NewCheckpointReader,
load_checkpoint, load_variable, list_variables.

The `.index` file is a LevelDB table (docs/formats/checkpoint.md): data blocks of
prefix-compressed (key, BundleEntryProto) entries found through an index block,
a 48-byte footer at the end; the entry "" holds the BundleHeaderProto. The
table layout is read here; the protos in it are decoded by the protobuf bridge
(framework/proto_bridge.py). Tensor
bytes are read from `<prefix>.data-<shard>-of-<n>` at the entry's offset."""

import os
import struct

import numpy as np

from recflow.framework import dtypes
from recflow.framework import errors
from recflow.framework import proto_bridge
from recflow.training import checkpoint_management

_TABLE_MAGIC = 0xdb4775248b80fb57
_FOOTER_SIZE = 48
_BLOCK_TRAILER_SIZE = 5


def _data_loss(path, what):
  return errors.DataLossError(None, None, "Checkpoint %s is corrupt: %s" % (path, what))


def _varint(buf, pos, path):
  n = shift = 0
  while True:
    if pos >= len(buf) or shift > 63:
      raise _data_loss(path, "bad varint")
    b = buf[pos]
    pos += 1
    n |= (b & 0x7F) << shift
    shift += 7
    if not b & 0x80:
      return n, pos


def _read_block(data, offset, size, path):
  end = offset + size
  if end + _BLOCK_TRAILER_SIZE > len(data):
    raise _data_loss(path, "truncated block")
  if data[end] != 0:
    raise _data_loss(path, "compressed blocks (type %d) are not supported" % data[end])
  return data[offset:end]


def _block_entries(block, path):
  if len(block) < 4:
    raise _data_loss(path, "block too small")
  num_restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
  limit = len(block) - 4 - 4 * num_restarts
  if limit < 0:
    raise _data_loss(path, "bad restart count")
  pos = 0
  key = b""
  while pos < limit:
    shared, pos = _varint(block, pos, path)
    unshared, pos = _varint(block, pos, path)
    value_len, pos = _varint(block, pos, path)
    if shared > len(key) or pos + unshared + value_len > limit:
      raise _data_loss(path, "bad block entry")
    key = key[:shared] + block[pos:pos + unshared]
    pos += unshared
    yield bytes(key), block[pos:pos + value_len]
    pos += value_len


def _block_handle(buf, pos, path):
  offset, pos = _varint(buf, pos, path)
  size, pos = _varint(buf, pos, path)
  return offset, size, pos


def _decode(type_name, raw, path):
  try:
    return proto_bridge.decode(type_name, raw, enums_as_ints=True)
  except ValueError as e:
    raise _data_loss(path, str(e))


class _Entry(object):
  """A tensor's BundleEntryProto (decoded by the protobuf bridge)."""
  __slots__ = ("dtype", "shape", "shard_id", "offset", "size", "slices")

  def __init__(self, raw, path):
    d = _decode("tensorflow.BundleEntryProto", raw, path)
    self.dtype = int(d.get("dtype", 0))
    self.shape = [int(dim.get("size", 0)) for dim in d.get("shape", {}).get("dim", [])]
    self.shard_id = int(d.get("shard_id", 0))
    self.offset = int(d.get("offset", 0))
    self.size = int(d.get("size", 0))
    # A partitioned tensor: one [(start, length or -1 for all), ...] per part.
    self.slices = []
    for proto in d.get("slices", []):
      extents = proto.get("extent", [])
      if extents and len(extents) != len(self.shape):
        raise _data_loss(path, "a slice of rank %d in an entry of shape %s" %
                         (len(extents), self.shape))
      self.slices.append([(int(e.get("start", 0)), int(e.get("length", -1))) for e in extents]
                         or [(0, -1)] * len(self.shape))


# TensorFlow's OrderedCode (tensorflow/core/lib/strings/ordered_code.cc), as
# recflow/checkpoint/tensor_slice.cc writes it: the keys of a sliced tensor's
# parts.
def _num_increasing(v):
  raw = v.to_bytes(8, "big").lstrip(b"\0")
  return bytes([len(raw)]) + raw


def _signed_num_increasing(v):
  magnitude = ~v if v < 0 else v
  n = min(10, (magnitude.bit_length() + 1 + 6) // 7)
  field = bytearray((v & ((1 << 80) - 1)).to_bytes(10, "big"))
  out = field[10 - n:]
  for b in range(n):
    out[b // 8] ^= 0x80 >> (b % 8)
  return bytes(out)


def _slice_key(name, extents):
  key = _num_increasing(0)
  escape = {0: b"\x00\xff", 0xff: b"\xff\x00"}
  key += b"".join(escape.get(c, bytes([c])) for c in name.encode("utf-8"))
  key += b"\x00\x01" + _num_increasing(len(extents))
  for start, length in extents:
    key += _signed_num_increasing(start) + _signed_num_increasing(length)
  return key


class CheckpointReader(object):
  """TF's CheckpointReader: the tensors of one V2 checkpoint, by name."""

  def __init__(self, prefix):
    self._prefix = prefix
    index = prefix + ".index"
    try:
      with open(index, "rb") as f:
        data = f.read()
    except (IOError, OSError):
      raise errors.NotFoundError(
          None, None, "Unsuccessful TensorSliceReader constructor: Failed to find any "
          "matching files for %s" % prefix)
    if len(data) < _FOOTER_SIZE or \
       struct.unpack_from("<Q", data, len(data) - 8)[0] != _TABLE_MAGIC:
      raise _data_loss(index, "not a table (bad magic number)")
    footer = data[len(data) - _FOOTER_SIZE:]
    _, _, pos = _block_handle(footer, 0, index)  # metaindex
    index_offset, index_size, _ = _block_handle(footer, pos, index)
    self._entries = {}
    self._parts = {}  # slice key -> entry of one part of a sliced tensor
    self._num_shards = 1
    for _, handle in _block_entries(_read_block(data, index_offset, index_size, index), index):
      offset, size, _ = _block_handle(handle, 0, index)
      for key, value in _block_entries(_read_block(data, offset, size, index), index):
        if key == b"":
          header = _decode("tensorflow.BundleHeaderProto", value, index)
          self._num_shards = int(header.get("num_shards", 1))
          if int(header.get("endianness", 0)) != 0:
            raise _data_loss(index, "big-endian checkpoints are not supported")
          continue
        if key[:1] == b"\x00":  # a part of a sliced tensor (TF's slice keys)
          self._parts[key] = _Entry(value, index)
          continue
        self._entries[key.decode("utf-8")] = _Entry(value, index)

  def has_tensor(self, name):
    return name in self._entries

  def get_variable_to_shape_map(self):
    return {k: list(e.shape) for k, e in self._entries.items()}

  def get_variable_to_dtype_map(self):
    return {k: dtypes.as_dtype(e.dtype) for k, e in self._entries.items()}

  def debug_string(self):
    return "".join("%s (%s) %s\n" % (k, dtypes.as_dtype(e.dtype).name, e.shape)
                   for k, e in sorted(self._entries.items())).encode("utf-8")

  def get_tensor(self, name):
    entry = self._entries.get(name)
    if entry is None:
      raise errors.NotFoundError(None, None,
                                 "Key %s not found in checkpoint %s" % (name, self._prefix))
    if entry.slices:
      return self._assemble(name, entry)
    return self._read(name, entry)

  def _assemble(self, name, entry):
    """A sliced (partitioned) tensor put together from its parts."""
    out = None
    covered = 0
    for extents in entry.slices:
      part = self._parts.get(_slice_key(name, extents))
      where = "slice %s of tensor %s" % (":".join(
          "-" if n < 0 else "%d,%d" % (s, n) for s, n in extents), name)
      if part is None:
        raise _data_loss(self._prefix + ".index", "%s is listed but has no entry" % where)
      index = tuple(slice(None) if n < 0 else slice(s, s + n) for s, n in extents)
      want = [d if n < 0 else n for (s, n), d in zip(extents, entry.shape)]
      if part.shape != want or part.dtype != entry.dtype or any(
          n >= 0 and s + n > d for (s, n), d in zip(extents, entry.shape)):
        raise _data_loss(self._prefix + ".index", "%s has shape %s, expected %s" %
                         (where, part.shape, want))
      value = self._read(where, part)
      if out is None:
        out = np.zeros(entry.shape, dtype=value.dtype)
        if value.dtype == object:
          out[...] = b""
      out[index] = value
      covered += value.size
    if covered != int(np.prod(entry.shape)):
      raise _data_loss(self._prefix + ".index", "the slices of tensor %s hold %d of its %d "
                       "elements" % (name, covered, int(np.prod(entry.shape))))
    return out

  def _read(self, name, entry):
    shard = "%s.data-%05d-of-%05d" % (self._prefix, entry.shard_id, self._num_shards)
    with open(shard, "rb") as f:
      f.seek(entry.offset)
      raw = f.read(entry.size)
    if len(raw) != entry.size:
      raise _data_loss(shard, "tensor %s lies past the end of the file" % name)
    dtype = dtypes.as_dtype(entry.dtype)
    shape = tuple(entry.shape)
    if dtype == dtypes.string:
      n = int(np.prod(shape)) if shape else 1
      lengths = []
      pos = 0
      for _ in range(n):
        length, pos = _varint(raw, pos, shard)
        lengths.append(length)
      pos += 4  # masked crc32c of the lengths
      out = []
      for length in lengths:
        out.append(raw[pos:pos + length])
        pos += length
      return np.array(out, dtype=object).reshape(shape)
    return np.frombuffer(raw, dtype=dtype.as_numpy_dtype).reshape(shape).copy()


def NewCheckpointReader(filepattern):  # pylint: disable=invalid-name
  return CheckpointReader(filepattern)


def _get_checkpoint_filename(ckpt_dir_or_file):
  if os.path.isdir(ckpt_dir_or_file):
    return checkpoint_management.latest_checkpoint(ckpt_dir_or_file)
  return ckpt_dir_or_file


def load_checkpoint(ckpt_dir_or_file):
  filename = _get_checkpoint_filename(ckpt_dir_or_file)
  if filename is None:
    raise ValueError("Couldn't find 'checkpoint' file or checkpoints in given directory %s" %
                     ckpt_dir_or_file)
  return NewCheckpointReader(filename)


def load_variable(ckpt_dir_or_file, name):
  if name.endswith(":0"):
    name = name[:-2]
  return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def list_variables(ckpt_dir_or_file):
  """Sorted (name, shape) pairs of the checkpoint's tensors."""
  reader = load_checkpoint(ckpt_dir_or_file)
  shapes = reader.get_variable_to_shape_map()
  return [(name, shapes[name]) for name in sorted(shapes)]
