"""Fetched arrays share recflow's buffer when nothing else holds it."""

import gc

import numpy as np

import recflow.compat.v1 as tf

N = 262144  # 1 MB of float32


def _owner_chain(a):
  chain = []
  base = a.base
  while base is not None:
    chain.append(type(base).__name__)
    base = getattr(base, "base", None)
  return chain


def test_a_1mb_fetch_is_not_copied():
  x = tf.placeholder(tf.float32, [None])
  y = x * 2.0
  with tf.Session() as sess:
    a = sess.run(y, {x: np.ones(N, np.float32)})
    b = sess.run(y, {x: np.ones(N, np.float32)})
  assert a.nbytes == 1 << 20
  # The array does not own its memory: its base is the capsule holding
  # recflow's reference-counted tensor buffer.
  assert not a.flags.owndata
  assert _owner_chain(a) == ["PyCapsule"]
  assert a.ctypes.data % 64 == 0  # recflow's buffers are 64-byte aligned
  # Nothing else holds the buffer, so the array is writeable, and writing it
  # changes nothing in the session (the next run computes afresh).
  assert a.flags.writeable
  a[:] = 7.0
  assert not np.shares_memory(a, b)
  assert (b == 2.0).all()
  # The buffer lives as long as the array, beyond the session.
  del sess
  gc.collect()
  assert float(b.sum()) == 2.0 * N
  view = b[10:20]
  del b
  gc.collect()
  assert (view == 2.0).all()


def test_shared_buffers_are_copied_so_writes_never_reach_the_model():
  v = tf.Variable(np.ones(N, np.float32), name="v")
  c = tf.constant(np.arange(4, dtype=np.float32))
  with tf.Session() as sess:
    sess.run(v.initializer)
    value = sess.run(v)  # the variable's own buffer: copied
    assert value.flags.owndata and value.flags.writeable
    value[:] = 0.0
    assert float(sess.run(v).sum()) == N
    const = sess.run(c)  # the Const kernel keeps its tensor: copied
    assert const.flags.owndata
    const[0] = 100.0
    assert sess.run(c).tolist() == [0.0, 1.0, 2.0, 3.0]
    twice = sess.run([v.value(), v.value()])
    assert twice[0] is twice[1]


def test_feeds_are_copied_so_the_callers_array_stays_the_callers():
  x = tf.placeholder(tf.float32, [4])
  v = tf.Variable(tf.zeros([4]))
  assign = tf.assign(v, x)
  fed = np.arange(4, dtype=np.float32)
  with tf.Session() as sess:
    sess.run(v.initializer)
    sess.run(assign, {x: fed})
    fed[:] = -1.0
    assert sess.run(v).tolist() == [0.0, 1.0, 2.0, 3.0]
    echoed = sess.run(x, {x: fed})  # a fed tensor fetched back
    assert echoed.tolist() == [-1.0] * 4 and not np.shares_memory(echoed, fed)


def test_strings_and_other_dtypes_come_back_as_numpy():
  values = {tf.float16: np.float16, tf.float64: np.float64, tf.int8: np.int8,
            tf.uint8: np.uint8, tf.int16: np.int16, tf.uint16: np.uint16, tf.int32: np.int32,
            tf.int64: np.int64, tf.bool: np.bool_, tf.complex64: np.complex64}
  with tf.Session() as sess:
    for dtype, np_type in values.items():
      x = tf.placeholder(dtype, [3])
      out = sess.run(tf.identity(x), {x: np.array([1, 0, 1]).astype(np_type)})
      assert out.dtype == np_type and out.tolist() == np.array([1, 0, 1]).astype(
          np_type).tolist()
    s = tf.placeholder(tf.string, [2, 1])
    out = sess.run(tf.identity(s), {s: [[b"ab\x00c"], ["\u00e9"]]})
    assert out.dtype == object and out.tolist() == [[b"ab\x00c"], ["\u00e9".encode()]]
    empty = sess.run(tf.identity(tf.placeholder_with_default(np.zeros((0, 3), np.float32),
                                                             [None, 3])))
    assert empty.shape == (0, 3)


def test_scalar_fetches_are_numpy_scalars_and_bytes_as_in_tensorflow():
  with tf.Session() as sess:
    f, i, s, v = sess.run([tf.constant(1.5), tf.constant(7, tf.int64), tf.constant("ab"),
                           tf.constant([1.0])])
    single = sess.run(tf.constant(2, tf.int32))
    fn = sess.make_callable(tf.constant("x"))
    assert type(f) is np.float32 and f == 1.5  # pylint: disable=unidiomatic-typecheck
    assert type(i) is np.int64 and i == 7  # pylint: disable=unidiomatic-typecheck
    assert type(s) is bytes and s == b"ab"  # pylint: disable=unidiomatic-typecheck
    assert type(single) is np.int32 and single == 2  # pylint: disable=unidiomatic-typecheck
    assert fn() == b"x"
    assert isinstance(v, np.ndarray) and v.shape == (1,)
