"""tf.nn's convolution and pooling functions: argument forms (ints, spatial pairs, 4
values, explicit padding), against NumPy, gradients by finite differences, errors."""

import numpy as np
import pytest

import recflow.compat.v1 as tf


def _ref_conv(x, w, stride=1, pads=((0, 0), (0, 0)), dilation=1):
  x = np.pad(x, [(0, 0), pads[0], pads[1], (0, 0)])
  kh, kw, _, o = w.shape
  eh, ew = (kh - 1) * dilation + 1, (kw - 1) * dilation + 1
  oh, ow = (x.shape[1] - eh) // stride + 1, (x.shape[2] - ew) // stride + 1
  out = np.zeros((x.shape[0], oh, ow, o))
  for i in range(oh):
    for j in range(ow):
      patch = x[:, i * stride:i * stride + eh:dilation, j * stride:j * stride + ew:dilation, :]
      out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
  return out


def test_conv2d_argument_forms_agree_with_numpy():
  rng = np.random.RandomState(0)
  xv = rng.randn(2, 6, 7, 3).astype(np.float32)
  wv = rng.randn(3, 3, 3, 4).astype(np.float32)
  x, w = tf.constant(xv), tf.constant(wv)
  outs = [tf.nn.conv2d(x, w, 2, "VALID"), tf.nn.conv2d(x, w, [2, 2], "VALID"),
          tf.nn.conv2d(x, w, [1, 2, 2, 1], "VALID"),
          tf.nn.conv2d(x, filters=w, strides=1, padding=[[0, 0], [1, 2], [0, 1], [0, 0]]),
          tf.nn.conv2d(x, w, 1, "VALID", dilations=2),
          tf.nn.convolution(x, w, "VALID", strides=2)]
  with tf.Session() as sess:
    a, b, c, explicit, dilated, conv = sess.run(outs)
  want = _ref_conv(xv, wv, stride=2)
  for got in (a, b, c, conv):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(explicit, _ref_conv(xv, wv, pads=((1, 2), (0, 1))), rtol=1e-4,
                             atol=1e-4)
  np.testing.assert_allclose(dilated, _ref_conv(xv, wv, dilation=2), rtol=1e-4, atol=1e-4)


def test_depthwise_separable_pool_and_transpose():
  rng = np.random.RandomState(1)
  xv = rng.randn(1, 5, 5, 2).astype(np.float32)
  dw = rng.randn(3, 3, 2, 2).astype(np.float32)
  pw = rng.randn(1, 1, 4, 3).astype(np.float32)
  x = tf.constant(xv)
  depthwise = tf.nn.depthwise_conv2d(x, dw, [1, 1, 1, 1], "SAME")
  separable = tf.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "SAME")
  pooled_max = tf.nn.max_pool(x, 2, 2, "VALID")
  pooled_avg = tf.nn.avg_pool(x, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
  transposed = tf.nn.conv2d_transpose(tf.ones([1, 3, 3, 4]), tf.ones([3, 3, 2, 4]),
                                      [1, 5, 5, 2], [1, 2, 2, 1], "SAME")
  with tf.Session() as sess:
    d, s, m, a, t = sess.run([depthwise, separable, pooled_max, pooled_avg, transposed])
  padded = ((1, 1), (1, 1))
  want_d = np.concatenate([_ref_conv(xv[..., c:c + 1], dw[:, :, c:c + 1, :], pads=padded)
                           for c in range(2)], axis=-1)
  np.testing.assert_allclose(d, want_d, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(s, want_d @ pw[0, 0], rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(m[0, 0, 0], xv[0, :2, :2].max(axis=(0, 1)))
  np.testing.assert_allclose(a[0, 0, 0], xv[0, :2, :2].mean(axis=(0, 1)), rtol=1e-5)
  # SAME, stride 2: output pixel 1 gathers two filter taps per dimension, pixel 2 one.
  assert t.shape == (1, 5, 5, 2) and t[0, 1, 1, 0] == 16.0 and t[0, 2, 2, 0] == 4.0


def test_conv_gradients_match_finite_differences():
  rng = np.random.RandomState(2)
  xv = rng.randn(1, 4, 4, 2)
  wv = rng.randn(2, 2, 2, 3)
  x = tf.placeholder(tf.float64, xv.shape)
  w = tf.placeholder(tf.float64, wv.shape)
  loss = tf.reduce_sum(tf.square(tf.nn.max_pool(tf.nn.conv2d(x, w, 1, "SAME"), 2, 2, "VALID")))
  gx, gw = tf.gradients(loss, [x, w])
  with tf.Session() as sess:
    got_x, got_w = sess.run([gx, gw], {x: xv, w: wv})
    eps = 1e-6
    for idx in [(0, 1, 2, 1), (0, 3, 0, 0)]:
      plus, minus = xv.copy(), xv.copy()
      plus[idx] += eps
      minus[idx] -= eps
      numeric = (sess.run(loss, {x: plus, w: wv}) - sess.run(loss, {x: minus, w: wv})) / (2 * eps)
      assert got_x[idx] == pytest.approx(numeric, rel=1e-4, abs=1e-6)
    for idx in [(0, 1, 1, 2), (1, 0, 0, 0)]:
      plus, minus = wv.copy(), wv.copy()
      plus[idx] += eps
      minus[idx] -= eps
      numeric = (sess.run(loss, {x: xv, w: plus}) - sess.run(loss, {x: xv, w: minus})) / (2 * eps)
      assert got_w[idx] == pytest.approx(numeric, rel=1e-4, abs=1e-6)


def test_conv_argument_errors():
  x, w = tf.zeros([1, 4, 4, 1]), tf.zeros([2, 2, 1, 1])
  with pytest.raises(ValueError, match="padding"):
    tf.nn.conv2d(x, w, 1, "FULL")
  with pytest.raises(ValueError, match="strides"):
    tf.nn.conv2d(x, w, [1, 1, 1], "SAME")
  with pytest.raises(ValueError, match="explicit padding"):
    tf.nn.conv2d(x, w, 1, [[1, 1], [1, 1]])
  with pytest.raises(ValueError, match="filter or filters"):
    tf.nn.conv2d(x, w, 1, "SAME", filters=w)
  with pytest.raises(ValueError, match="padding"):
    tf.nn.max_pool(x, 2, 2, [[0, 0]] * 4)
  with pytest.raises(NotImplementedError, match="2-D"):
    tf.nn.convolution(tf.zeros([1, 4, 1]), tf.zeros([2, 1, 1]), "SAME")
  with pytest.raises(ValueError, match="rate or dilations"):
    tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME", rate=[2, 2], dilations=[2, 2])
