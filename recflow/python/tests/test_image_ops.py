"""tf.image and tf.nn.lrn: resizing in TensorFlow's three coordinate modes,
PNG/JPEG round trips, dtype conversion, standardization, LRN and the
gradients of resize_bilinear and lrn; bad images are errors."""

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow.ops import gen_ops as gen
from recflow.ops import image_ops


def _run(fetches, feed_dict=None):
  with tf.Session() as sess:
    return sess.run(fetches, feed_dict=feed_dict)


def test_generated_wrappers_exist():
  for name in ("resize_bilinear", "resize_bilinear_grad", "decode_png", "decode_jpeg",
               "decode_image", "encode_png", "encode_jpeg", "lrn", "lrn_grad"):
    assert callable(getattr(gen, name)), name


@pytest.mark.parametrize("align_corners,half_pixel_centers,want", [
    (False, False, [0, 5, 10, 10]),
    (True, False, [0, 10 / 3, 20 / 3, 10]),
    (False, True, [0, 2.5, 7.5, 10]),
])
def test_resize_bilinear_modes(align_corners, half_pixel_centers, want):
  row = np.array([0, 10], np.float32).reshape(1, 1, 2, 1)
  out = tf.image.resize_bilinear(row, [1, 4], align_corners=align_corners,
                                 half_pixel_centers=half_pixel_centers)
  assert out.dtype == tf.float32
  assert out.get_shape().as_list() == [1, 1, 4, 1]
  np.testing.assert_allclose(_run(out).reshape(-1), want, rtol=1e-6, atol=1e-6)


def test_resize_accepts_3d_images_and_integer_types():
  rng = np.random.RandomState(0)
  image = rng.randint(0, 256, size=(5, 6, 3)).astype(np.uint8)
  out = tf.image.resize_images(image, [10, 12])
  assert out.get_shape().as_list() == [10, 12, 3]
  got = _run(out)
  assert got.dtype == np.float32
  # Growing by exactly 2 with the legacy mapping: even pixels are the input's.
  np.testing.assert_allclose(got[::2, ::2], image.astype(np.float32), atol=1e-4)
  same = tf.image.resize(tf.constant(image), [5, 6])
  assert same.dtype == tf.uint8  # already that size: returned as is
  for method in ("nearest", tf.image.ResizeMethod.BICUBIC, "area"):
    with pytest.raises(NotImplementedError, match="bilinear"):
      tf.image.resize_images(image, [3, 3], method=method)


def test_resize_bilinear_gradient_matches_numeric():
  rng = np.random.RandomState(1)
  x0 = rng.uniform(-1, 1, size=(1, 3, 4, 2)).astype(np.float32)
  g0 = rng.uniform(-1, 1, size=(1, 5, 7, 2)).astype(np.float32)
  x = tf.placeholder(tf.float32, [1, 3, 4, 2])
  y = tf.image.resize_bilinear(x, [5, 7], half_pixel_centers=True)
  loss = tf.reduce_sum(y * g0)
  (dx,) = tf.gradients(loss, [x])
  with tf.Session() as sess:
    got = sess.run(dx, {x: x0})
    eps = 1e-2
    numeric = np.zeros_like(x0)
    for i in np.ndindex(*x0.shape):
      up, down = x0.copy(), x0.copy()
      up[i] += eps
      down[i] -= eps
      numeric[i] = (sess.run(loss, {x: up}) - sess.run(loss, {x: down})) / (2 * eps)
  np.testing.assert_allclose(got, numeric, atol=2e-3)


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_png_round_trip(channels, dtype):
  rng = np.random.RandomState(channels)
  image = rng.randint(0, np.iinfo(dtype).max + 1, size=(9, 11, channels)).astype(dtype)
  png = tf.image.encode_png(image)
  back = tf.image.decode_png(png, dtype=tf.as_dtype(dtype))
  assert back.get_shape().as_list() == [None, None, None]
  got = _run(back)
  assert got.dtype == dtype
  np.testing.assert_array_equal(got, image)
  as_float = _run(tf.image.decode_image(png, dtype=tf.float32))
  np.testing.assert_allclose(as_float, image / float(np.iinfo(dtype).max), rtol=1e-6)


def test_jpeg_round_trip_within_tolerance():
  y, x = np.mgrid[0:32, 0:40]
  image = np.stack([(127 + 100 * np.sin(0.1 * x + c) * np.cos(0.07 * y)) for c in range(3)],
                   axis=-1).astype(np.uint8)
  jpeg = tf.image.encode_jpeg(image, quality=95)
  got = _run(tf.image.decode_jpeg(jpeg, channels=3))
  assert got.shape == image.shape
  assert np.abs(got.astype(np.float64) - image).mean() < 3
  small = _run(tf.image.decode_jpeg(jpeg, ratio=2))
  assert small.shape == (16, 20, 3)


def test_bad_images_are_errors():
  for bad, message in ((b"", "input is empty"), (b"garbage!", "unknown image format"),
                       (b"GIF89a\x01\x00", "GIF images are not supported"),
                       (b"\x89PNG\r\n\x1a\n\x00\x00", "truncated PNG")):
    with pytest.raises(tf.errors.OpError, match=message):
      _run(tf.image.decode_image(bad))
  png = _run(tf.image.encode_png(np.zeros((4, 4, 3), np.uint8) + 7))
  with pytest.raises(tf.errors.InvalidArgumentError, match="DecodePng: truncated PNG"):
    _run(tf.image.decode_png(png[:-20]))


def test_convert_image_dtype_scaling():
  image = np.array([0, 1, 128, 255], np.uint8)
  as_float = _run(tf.image.convert_image_dtype(image, tf.float32))
  np.testing.assert_allclose(as_float, image / 255.0, rtol=1e-6)
  back = _run(tf.image.convert_image_dtype(as_float, tf.uint8))
  np.testing.assert_array_equal(back, image)
  wide = _run(tf.image.convert_image_dtype(image, tf.uint16))
  np.testing.assert_array_equal(wide, image.astype(np.uint16) * 256)  # 255 -> 65280, as TF
  narrow = _run(tf.image.convert_image_dtype(wide, tf.uint8))
  np.testing.assert_array_equal(narrow, image)
  over = _run(tf.image.convert_image_dtype(np.array([1.5, -0.5], np.float32), tf.uint8,
                                           saturate=True))
  np.testing.assert_array_equal(over, [255, 0])


def test_per_image_standardization():
  rng = np.random.RandomState(3)
  image = rng.uniform(0, 255, size=(2, 4, 5, 3)).astype(np.float32)
  got = _run(tf.image.per_image_standardization(image))
  for b in range(2):
    mean = image[b].mean()
    std = max(image[b].std(), 1 / np.sqrt(image[b].size))
    np.testing.assert_allclose(got[b], (image[b] - mean) / std, rtol=1e-4, atol=1e-4)


def test_lrn_and_its_gradient():
  rng = np.random.RandomState(4)
  x0 = rng.uniform(-2, 2, size=(2, 3, 3, 6)).astype(np.float32)
  x = tf.placeholder(tf.float32, x0.shape)
  y = image_ops.local_response_normalization(x, depth_radius=2, bias=1.5, alpha=0.3, beta=0.75)
  g0 = rng.uniform(-1, 1, size=x0.shape).astype(np.float32)
  (dx,) = tf.gradients(tf.reduce_sum(y * g0), [x])
  with tf.Session() as sess:
    got, grad = sess.run([y, dx], {x: x0})
  sq = np.zeros_like(x0, np.float64)
  for d in range(6):
    sq[..., d] = (x0[..., max(0, d - 2):d + 3].astype(np.float64) ** 2).sum(-1)
  np.testing.assert_allclose(got, x0 / (1.5 + 0.3 * sq) ** 0.75, rtol=1e-5, atol=1e-6)
  eps, numeric = 1e-3, np.zeros(x0.size)
  for i in range(x0.size):
    def f(v):
      xx = x0.astype(np.float64).reshape(-1).copy()
      xx[i] += v
      xx = xx.reshape(x0.shape)
      s = np.zeros_like(xx)
      for d in range(6):
        s[..., d] = (xx[..., max(0, d - 2):d + 3] ** 2).sum(-1)
      return (xx / (1.5 + 0.3 * s) ** 0.75 * g0).sum()
    numeric[i] = (f(eps) - f(-eps)) / (2 * eps)
  np.testing.assert_allclose(grad.reshape(-1), numeric, atol=1e-4)
