"""tf.io: TFRecord files of tf.train.Examples written and read from Python,
parse_example / parse_single_example with Fixed/VarLen features, decode_csv.
The programs are written for TensorFlow 1.15 with only the import changed."""

import os
import struct

import numpy as np
import pytest

import recflow.compat.v1 as tf


# ---------------------------------------------------------------------------
# A reference TFRecord framer, from the format's definition (TensorFlow's
# record_writer.cc documents it): crc32c (Castagnoli, reflected 0x82F63B78),
# masked as ((crc >> 15) | (crc << 17)) + 0xa282ead8.

def _crc32c_table():
  table = []
  for n in range(256):
    c = n
    for _ in range(8):
      c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    table.append(c)
  return table


_TABLE = _crc32c_table()


def crc32c(data):
  crc = 0xFFFFFFFF
  for b in data:
    crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
  return crc ^ 0xFFFFFFFF


def masked_crc(data):
  crc = crc32c(data)
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_bytes(records):
  out = b""
  for r in records:
    length = struct.pack("<Q", len(r))
    out += length + struct.pack("<I", masked_crc(length)) + r + struct.pack("<I", masked_crc(r))
  return out


def test_reference_crc32c_matches_the_standard_check_value():
  assert crc32c(b"123456789") == 0xE3069283


# ---------------------------------------------------------------------------
# tf.train.Example and TFRecord files

def _make_example(i, rng):
  ids = [int(v) for v in rng.randint(-1000, 1 << 40, size=i % 4)]
  return tf.train.Example(features=tf.train.Features(feature={
      "label": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i % 2)])),
      "age": tf.train.Feature(int64_list=tf.train.Int64List(value=[20 + i])),
      "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
      "tags": tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[("t%d" % j).encode() for j in range(i % 3)])),
      "emb": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5 * i, -0.25 * i])),
  })), ids


def test_example_messages_round_trip_and_behave_like_protobuf():
  ex = tf.train.Example()
  assert not ex.HasField("features")
  ex.features.feature["x"].int64_list.value.append(3)
  ex.features.feature["x"].int64_list.value.extend([4, -(1 << 63)])
  ex.features.feature["w"].float_list.value[:] = [0.1, 2.0]
  ex.features.feature["s"].bytes_list.value.append(b"\x00\xffok")
  assert ex.HasField("features")
  back = tf.train.Example.FromString(ex.SerializeToString())
  assert back == ex
  f = back.features.feature
  assert list(f["x"].int64_list.value) == [3, 4, -(1 << 63)]
  assert f["x"].WhichOneof("kind") == "int64_list"
  # FloatList holds float32 values, as protobuf's does.
  assert list(f["w"].float_list.value) == [float(np.float32(0.1)), 2.0]
  assert list(f["s"].bytes_list.value) == [b"\x00\xffok"]
  other = tf.train.Example()
  assert other.ParseFromString(ex.SerializeToString()) > 0
  assert other == back
  assert 'key: "x"' in str(back)
  with pytest.raises(TypeError):
    tf.train.Int64List(value=[1.5])
  with pytest.raises(TypeError):
    tf.train.BytesList(value=["not bytes"])
  with pytest.raises(ValueError):
    tf.train.Int64List(value=[1 << 63])
  with pytest.raises(TypeError):
    tf.train.Feature(int64_list=tf.train.FloatList(value=[1.0]))
  with pytest.raises(ValueError):
    tf.train.Example.FromString(b"\xff\xff\xff")


def test_tfrecord_writer_frames_records_as_tensorflow(tmp_path):
  path = str(tmp_path / "data.tfrecord")
  records = [b"", b"a", b"\x00" * 300, tf.train.Example().SerializeToString(), b"xyz" * 1000]
  with tf.io.TFRecordWriter(path) as writer:
    for r in records:
      writer.write(r)
  with open(path, "rb") as f:
    assert f.read() == tfrecord_bytes(records)
  assert list(tf.io.tf_record_iterator(path)) == records
  assert list(tf.python_io.tf_record_iterator(path)) == records
  # tf.python_io's writer, flush() then close() twice.
  w = tf.python_io.TFRecordWriter(path, options=tf.io.TFRecordOptions(""))
  w.write("text is written as UTF-8")
  w.flush()
  w.close()
  w.close()
  with pytest.raises(ValueError, match="after close"):
    w.write(b"x")
  assert list(tf.io.tf_record_iterator(path)) == [b"text is written as UTF-8"]


def test_tfrecord_errors(tmp_path):
  path = str(tmp_path / "bad.tfrecord")
  data = tfrecord_bytes([b"first", b"second record"])
  corrupt = bytearray(data)
  corrupt[len(data) - 6] ^= 0x01  # a byte of the second record's data
  with open(path, "wb") as f:
    f.write(bytes(corrupt))
  it = tf.io.tf_record_iterator(path)
  assert next(it) == b"first"
  with pytest.raises(tf.errors.DataLossError, match="bad.tfrecord"):
    next(it)
  with open(path, "wb") as f:
    f.write(data[:-3])  # truncated
  with pytest.raises(tf.errors.DataLossError, match="truncated"):
    list(tf.io.tf_record_iterator(path))
  with pytest.raises(tf.errors.NotFoundError):
    list(tf.io.tf_record_iterator(str(tmp_path / "missing.tfrecord")))
  with pytest.raises(tf.errors.NotFoundError):
    tf.io.TFRecordWriter(str(tmp_path / "no" / "dir" / "x.tfrecord"))
  with pytest.raises(NotImplementedError, match="GZIP"):
    tf.io.TFRecordWriter(path, options="GZIP")
  with pytest.raises(NotImplementedError, match="ZLIB"):
    list(tf.io.tf_record_iterator(path, tf.io.TFRecordOptions(
        tf.io.TFRecordCompressionType.ZLIB)))


def test_write_examples_then_parse_example_program(tmp_path):
  # A TF 1.15 program: write Examples to a TFRecord file, read it back and
  # parse the records with tf.parse_example.
  rng = np.random.RandomState(5)
  path = os.path.join(str(tmp_path), "examples.tfrecord")
  made = [_make_example(i, rng) for i in range(7)]
  with tf.python_io.TFRecordWriter(path) as writer:
    for ex, _ in made:
      writer.write(ex.SerializeToString())
  serialized = tf.placeholder(tf.string, [None], name="serialized")
  features = {
      "label": tf.FixedLenFeature([], tf.float32),
      "age": tf.io.FixedLenFeature([1], tf.int64),
      "emb": tf.FixedLenFeature([2], tf.float32),
      "missing": tf.FixedLenFeature([2], tf.int64, default_value=[-1, -2]),
      "ids": tf.VarLenFeature(tf.int64),
      "tags": tf.io.VarLenFeature(tf.string),
  }
  parsed = tf.parse_example(serialized, features)
  assert parsed["label"].shape.as_list() == [None]
  assert parsed["emb"].shape.as_list() == [None, 2]
  assert isinstance(parsed["ids"], tf.SparseTensor)
  assert parsed["ids"].op.type == "ParseExample"
  records = list(tf.io.tf_record_iterator(path))
  with tf.Session() as sess:
    out = sess.run(parsed, feed_dict={serialized: records})
  np.testing.assert_array_equal(out["label"], [i % 2 for i in range(7)])
  np.testing.assert_array_equal(out["age"], [[20 + i] for i in range(7)])
  np.testing.assert_allclose(out["emb"], [[0.5 * i, -0.25 * i] for i in range(7)])
  np.testing.assert_array_equal(out["missing"], [[-1, -2]] * 7)
  want_ind, want_vals = [], []
  for b, (_, ids) in enumerate(made):
    want_ind += [[b, j] for j in range(len(ids))]
    want_vals += ids
  np.testing.assert_array_equal(out["ids"].indices, np.array(want_ind).reshape(-1, 2))
  np.testing.assert_array_equal(out["ids"].values, want_vals)
  np.testing.assert_array_equal(out["ids"].dense_shape, [7, max(len(i) for _, i in made)])
  assert list(out["tags"].values) == [("t%d" % j).encode() for i in range(7)
                                      for j in range(i % 3)]
  np.testing.assert_array_equal(out["tags"].dense_shape, [7, 2])


def test_fixed_len_sequence_feature_is_padded():
  exs = []
  for n in (2, 0, 3):
    ex = tf.train.Example()
    ex.features.feature["seq"].float_list.value.extend([float(10 * n + k) for k in range(2 * n)])
    ex.features.feature["other"].int64_list.value.append(n)
    exs.append(ex.SerializeToString())
  parsed = tf.io.parse_example(exs, {
      "seq": tf.io.FixedLenSequenceFeature([2], tf.float32, allow_missing=True,
                                           default_value=-1.0),
      "absent": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True),
  })
  assert parsed["seq"].shape.as_list() == [3, None, 2]
  with tf.Session() as sess:
    seq, absent = sess.run([parsed["seq"], parsed["absent"]])
  want = -np.ones((3, 3, 2), np.float32)
  want[0, :2] = [[20, 21], [22, 23]]
  want[2, :3] = [[30, 31], [32, 33], [34, 35]]
  np.testing.assert_array_equal(seq, want)
  assert absent.shape == (3, 0)
  with pytest.raises(ValueError, match="allow_missing"):
    tf.io.parse_example(exs, {"seq": tf.io.FixedLenSequenceFeature([2], tf.float32)})


def test_parse_single_example():
  rng = np.random.RandomState(1)
  ex, ids = _make_example(3, rng)
  parsed = tf.io.parse_single_example(ex.SerializeToString(), {
      "ids": tf.io.VarLenFeature(tf.int64),
      "emb": tf.io.FixedLenFeature([2], tf.float32),
      "age": tf.io.FixedLenFeature([], tf.int64),
      "gone": tf.io.FixedLenFeature([], tf.string, default_value="none"),
  })
  assert parsed["emb"].op.type == "ParseSingleExample"
  assert parsed["emb"].shape.as_list() == [2]
  with tf.Session() as sess:
    out = sess.run(parsed)
  np.testing.assert_array_equal(out["ids"].indices, [[j] for j in range(len(ids))])
  np.testing.assert_array_equal(out["ids"].values, ids)
  np.testing.assert_array_equal(out["ids"].dense_shape, [len(ids)])
  np.testing.assert_allclose(out["emb"], [1.5, -0.75])
  assert out["age"] == 23
  assert out["gone"] == b"none"
  with pytest.raises(ValueError, match="scalar"):
    tf.io.parse_single_example([b"a", b"b"], {"x": tf.io.VarLenFeature(tf.int64)})


def test_parse_example_bad_input_names_the_feature():
  serialized = tf.placeholder(tf.string, [None])
  parsed = tf.parse_example(serialized, {
      "need": tf.FixedLenFeature([1], tf.int64),
      "ids": tf.VarLenFeature(tf.int64),
  })
  good = tf.train.Example()
  good.features.feature["need"].int64_list.value.append(1)
  missing = tf.train.Example()
  missing.features.feature["ids"].int64_list.value.append(1)
  wrong_type = tf.train.Example()
  wrong_type.features.feature["need"].int64_list.value.append(1)
  wrong_type.features.feature["ids"].float_list.value.append(1.0)
  wrong_len = tf.train.Example()
  wrong_len.features.feature["need"].int64_list.value.extend([1, 2])
  with tf.Session() as sess:
    sess.run(parsed, {serialized: [good.SerializeToString()]})
    for bad, words in ((missing, ["need", "example 1"]), (wrong_type, ["ids", "example 1"]),
                       (wrong_len, ["need"]), (b"\x0a\x05garbage", ["example 1"])):
      data = bad if isinstance(bad, bytes) else bad.SerializeToString()
      with pytest.raises(tf.errors.InvalidArgumentError) as e:
        sess.run(parsed, {serialized: [good.SerializeToString(), data]})
      for w in words:
        assert w in str(e.value)
  with pytest.raises(ValueError, match="Missing"):
    tf.parse_example(serialized, {})
  with pytest.raises(ValueError, match="dtype"):
    tf.parse_example(serialized, {"x": tf.VarLenFeature(tf.int32)})
  with pytest.raises(ValueError, match="need to be known"):
    tf.parse_example(serialized, {"x": tf.FixedLenFeature([None], tf.int64)})


# ---------------------------------------------------------------------------
# decode_csv

def test_decode_csv_program():
  records = tf.placeholder(tf.string, [None])
  cols = tf.decode_csv(records, record_defaults=[[0], [0.0], [""], tf.constant([], tf.int64),
                                                 np.array([-1.0])],
                       field_delim=";")
  assert [c.dtype for c in cols] == [tf.int32, tf.float32, tf.string, tf.int64, tf.float64]
  assert cols[0].op.type == "DecodeCSV"
  assert cols[0].shape.as_list() == [None]
  with tf.Session() as sess:
    a, b, c, d, e = sess.run(cols, {records: ['1;2.5;"x;""y""";7;0.5', ";;;8;"]})
  np.testing.assert_array_equal(a, [1, 0])
  np.testing.assert_array_equal(b, [2.5, 0.0])
  assert list(c) == [b'x;"y"', b""]
  np.testing.assert_array_equal(d, [7, 8])
  np.testing.assert_array_equal(e, [0.5, -1.0])
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError, match="required but missing in record 1"):
      sess.run(cols, {records: ["1;2;x;3;4", "1;2;x;;4"]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="expect 5 fields but have 4"):
      sess.run(cols, {records: ["1;2;x;3"]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a valid int32"):
      sess.run(cols, {records: ["q;2;x;3;4"]})


def test_decode_csv_na_value_select_cols_and_argument_errors():
  out = tf.io.decode_csv(["a,NA,3,x", "b,5,NA,y"], [[-1.0], [-2]], na_value="NA",
                         select_cols=[1, 2])
  with tf.Session() as sess:
    f, i = sess.run(out)
  np.testing.assert_array_equal(f, [-1.0, 5.0])
  np.testing.assert_array_equal(i, [3, -2])
  with pytest.raises(ValueError, match="strictly increasing"):
    tf.decode_csv(["1"], [[0], [0]], select_cols=[2, 1])
  with pytest.raises(ValueError, match="negative"):
    tf.decode_csv(["1"], [[0], [0]], select_cols=[-1, 1])
  with pytest.raises(ValueError, match="do not match"):
    tf.decode_csv(["1"], [[0], [0]], select_cols=[1])
  with pytest.raises((ValueError, TypeError)):
    tf.decode_csv(["1"], [[0]], field_delim="ab")
  with pytest.raises((ValueError, TypeError)):
    tf.decode_csv(["1"], [[True]])
