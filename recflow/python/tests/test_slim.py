"""recflow.contrib.slim: arg_scope, the layers against NumPy, variables and checkpoints,
batch norm's statistics, learning.train / evaluation, the data provider, model_deploy
and the nets of nets_factory."""

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow.contrib import slim
from recflow.contrib.slim.deployment import model_deploy
from recflow.contrib.slim.nets import nets_factory
from recflow.contrib.slim.nets import resnet_utils


def _run(fetches, feed=None):
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.local_variables_initializer())
    return sess.run(fetches, feed)


def _conv_ref(x, w, stride, padding):
  """NHWC convolution in NumPy (TF's SAME: the extra padding after)."""
  n, h, wd, c = x.shape
  kh, kw, _, o = w.shape
  if padding == "SAME":
    oh, ow = -(-h // stride), -(-wd // stride)
    ph = max((oh - 1) * stride + kh - h, 0)
    pw = max((ow - 1) * stride + kw - wd, 0)
    x = np.pad(x, [(0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)])
  else:
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
  out = np.zeros((n, oh, ow, o), np.float64)
  for i in range(oh):
    for j in range(ow):
      patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
      out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
  return out


# --- arg_scope -------------------------------------------------------------------------------


@slim.add_arg_scope
def _scoped(a, b=1, c=2):
  return (a, b, c)


def test_arg_scope_nests_overrides_and_reenters():
  assert _scoped(0) == (0, 1, 2)
  with slim.arg_scope([_scoped], b=10) as outer:
    assert _scoped(0) == (0, 10, 2)
    with slim.arg_scope([_scoped], c=20):
      assert _scoped(0) == (0, 10, 20)
      assert _scoped(0, b=5) == (0, 5, 20)  # an explicit argument wins
    assert _scoped(0) == (0, 10, 2)
  assert _scoped(0) == (0, 1, 2)
  with slim.arg_scope(outer):
    assert _scoped(0) == (0, 10, 2)
  assert slim.has_arg_scope(_scoped) and "b" in slim.arg_scoped_arguments(_scoped)


def test_arg_scope_errors_name_the_culprit():
  def plain(x):
    return x
  with pytest.raises(ValueError, match="not decorated with @add_arg_scope"):
    with slim.arg_scope([plain], x=1):
      pass
  with pytest.raises(TypeError, match="list_ops_or_scope"):
    with slim.arg_scope(_scoped, b=1):
      pass
  with pytest.raises(ValueError, match="kwargs must be empty"):
    with slim.arg_scope({}, b=1):
      pass
  with slim.arg_scope([_scoped], nonsense=1):  # as in TF: an error when called
    with pytest.raises(TypeError, match="nonsense"):
      _scoped(0)


# --- layers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stride,padding", [(1, "SAME"), (2, "SAME"), (2, "VALID")])
def test_conv2d_matches_numpy(stride, padding):
  rng = np.random.RandomState(1)
  xv = rng.randn(2, 7, 6, 3).astype(np.float32)
  x = tf.constant(xv)
  y = slim.conv2d(x, 4, [3, 2], stride=stride, padding=padding, activation_fn=None,
                  biases_initializer=tf.constant_initializer(0.5), scope="c")
  w_var, b_var = slim.get_variables("c")
  assert [v.op.name for v in (w_var, b_var)] == ["c/weights", "c/biases"]
  assert w_var.get_shape().as_list() == [3, 2, 3, 4]
  got, w = _run([y, w_var])
  np.testing.assert_allclose(got, _conv_ref(xv, w, stride, padding) + 0.5, rtol=1e-4,
                             atol=1e-5)
  assert list(got.shape) == y.get_shape().as_list()


def test_conv2d_nchw_equals_nhwc_and_normalizer_drops_biases():
  rng = np.random.RandomState(2)
  xv = rng.randn(2, 5, 5, 3).astype(np.float32)
  nhwc = slim.conv2d(tf.constant(xv), 4, 3, scope="a",
                     weights_initializer=tf.constant_initializer(0.1))
  nchw = slim.conv2d(tf.constant(xv.transpose(0, 3, 1, 2)), 4, 3, data_format="NCHW",
                     scope="b", weights_initializer=tf.constant_initializer(0.1))
  normed = slim.conv2d(tf.constant(xv), 4, 3, normalizer_fn=slim.batch_norm, scope="n")
  assert [v.op.name for v in slim.get_variables("n")] == [
      "n/weights", "n/BatchNorm/beta", "n/BatchNorm/moving_mean", "n/BatchNorm/moving_variance"]
  a, b, _ = _run([nhwc, nchw, normed])
  np.testing.assert_allclose(a, b.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)


def test_conv2d_bad_arguments():
  x = tf.zeros([1, 4, 4, 2])
  with pytest.raises(ValueError, match="padding"):
    slim.conv2d(x, 3, 3, padding="FULL")
  with pytest.raises(ValueError, match="num_outputs"):
    slim.conv2d(x, 0, 3)
  with pytest.raises(ValueError, match="rank 3"):
    slim.conv2d(tf.zeros([4, 4, 2]), 3, 3)
  with pytest.raises(ValueError, match="rate > 1"):
    slim.conv2d(x, 3, 3, stride=2, rate=2)
  with pytest.raises(ValueError, match="data_format"):
    slim.conv2d(x, 3, 3, data_format="NDHWC")


def test_separable_conv2d_and_depthwise_only():
  x = tf.constant(np.random.RandomState(3).randn(1, 6, 6, 4).astype(np.float32))
  full = slim.separable_conv2d(x, 8, [3, 3], depth_multiplier=2, scope="sep")
  depthwise = slim.separable_conv2d(x, None, [3, 3], stride=2, scope="dw")
  assert [(v.op.name, v.get_shape().as_list()) for v in slim.get_variables("sep")] == [
      ("sep/depthwise_weights", [3, 3, 4, 2]), ("sep/pointwise_weights", [1, 1, 8, 8]),
      ("sep/biases", [8])]
  assert [v.op.name for v in slim.get_variables("dw")] == ["dw/depthwise_weights",
                                                           "dw/biases"]
  a, b = _run([full, depthwise])
  assert a.shape == (1, 6, 6, 8) and b.shape == (1, 3, 3, 4)
  assert (a >= 0).all()  # relu by default


def test_fully_connected_any_rank_and_regularizers():
  xv = np.random.RandomState(4).randn(2, 3, 5).astype(np.float32)
  with slim.arg_scope([slim.fully_connected], weights_regularizer=slim.l2_regularizer(0.5)):
    y = slim.fully_connected(tf.constant(xv), 4, activation_fn=None, scope="fc")
  assert y.get_shape().as_list() == [2, 3, 4]
  reg = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
  assert len(reg) == 1
  got, w, b, r = _run([y, "fc/weights:0", "fc/biases:0", reg[0]])
  np.testing.assert_allclose(got, xv @ w + b, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(r, 0.5 * (w ** 2).sum() / 2, rtol=1e-5)
  with pytest.raises(ValueError, match="integer"):
    slim.l2_regularizer(1)
  with pytest.raises(ValueError, match="less than 0"):
    slim.l1_regularizer(-0.1)
  assert slim.l2_regularizer(0.0)(tf.ones([2])) is None
  with pytest.raises(ValueError, match="num_outputs"):
    slim.fully_connected(tf.zeros([2, 3]), 2.5)


def test_batch_norm_training_updates_moving_averages_and_inference_uses_them():
  rng = np.random.RandomState(5)
  xv = (rng.randn(8, 3, 3, 2) * 2 + 3).astype(np.float32)
  x = tf.placeholder(tf.float32, [None, 3, 3, 2])
  training = tf.placeholder(tf.bool, [])
  y = slim.batch_norm(x, decay=0.9, scale=True, is_training=training, scope="bn")
  updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
  assert len(updates) == 2
  mean_var = slim.get_variables("bn", suffix="moving_mean")[0]
  var_var = slim.get_variables("bn", suffix="moving_variance")[0]
  assert mean_var not in tf.trainable_variables()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    out, _ = sess.run([y, updates], {x: xv, training: True})
    m, v = sess.run([mean_var, var_var])
    inference = sess.run(y, {x: xv, training: False})
  batch_mean, batch_var = xv.mean(axis=(0, 1, 2)), xv.var(axis=(0, 1, 2))
  np.testing.assert_allclose(out, (xv - batch_mean) / np.sqrt(batch_var + 1e-3), rtol=1e-4,
                             atol=1e-4)
  np.testing.assert_allclose(m, 0.1 * batch_mean, rtol=1e-5)
  np.testing.assert_allclose(v, 0.9 + 0.1 * batch_var, rtol=1e-5)
  np.testing.assert_allclose(inference, (xv - m) / np.sqrt(v + 1e-3), rtol=1e-4, atol=1e-4)


def test_batch_norm_in_place_updates_and_nchw():
  xv = np.random.RandomState(6).randn(4, 2, 3, 3).astype(np.float32)
  y = slim.batch_norm(tf.constant(xv), decay=0.5, updates_collections=None, data_format="NCHW",
                      scope="bn")
  assert not tf.get_collection(tf.GraphKeys.UPDATE_OPS)
  assert slim.get_variables("bn")[0].get_shape().as_list() == [2]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    out = sess.run(y)
    m = sess.run("bn/moving_mean:0")
  np.testing.assert_allclose(m, 0.5 * xv.mean(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0, atol=1e-5)
  with pytest.raises(NotImplementedError, match="batch_weights"):
    slim.batch_norm(tf.constant(xv), batch_weights=tf.ones([4]))


def test_pool_flatten_dropout_one_hot_softmax():
  xv = np.arange(32, dtype=np.float32).reshape(1, 4, 4, 2)
  mx = slim.max_pool2d(tf.constant(xv), [2, 2])
  av = slim.avg_pool2d(tf.constant(xv), 2, stride=1, padding="SAME")
  flat = slim.flatten(mx)
  dropped = slim.dropout(tf.ones([1000]), 0.25, is_training=True)
  kept = slim.dropout(tf.ones([10]), 0.25, is_training=False)
  hot = slim.one_hot_encoding(tf.constant([2, 0]), 3)
  soft = slim.softmax(tf.constant([[[1.0, 2.0, 3.0]]]))
  assert mx.op.name.startswith("MaxPool2D/") and flat.get_shape().as_list() == [1, 8]
  m, a, d, k, h, s = _run([mx, av, dropped, kept, hot, soft])
  np.testing.assert_array_equal(m[0, :, :, 0], [[10, 14], [26, 30]])
  assert a.shape == (1, 4, 4, 2) and a[0, 3, 3, 0] == 30  # the window's in-bounds part
  assert set(np.unique(d)) <= {0.0, 4.0} and 0.15 < (d > 0).mean() < 0.35
  np.testing.assert_array_equal(k, 1.0)
  np.testing.assert_array_equal(h, [[0, 0, 1], [1, 0, 0]])
  np.testing.assert_allclose(s.sum(), 1.0, rtol=1e-6)
  with pytest.raises(ValueError, match="padding"):
    slim.max_pool2d(tf.zeros([1, 4, 4, 1]), 2, padding="EXPLICIT")


def test_repeat_stack_scopes_and_end_points():
  x = tf.zeros([1, 8, 8, 3])
  collection = "my_end_points"
  with slim.arg_scope([slim.conv2d], outputs_collections=collection):
    net = slim.repeat(x, 2, slim.conv2d, 4, [3, 3], scope="conv1")
  fc = slim.stack(slim.flatten(net), slim.fully_connected, [5, (6, )], scope="fc")
  names = [v.op.name for v in slim.get_model_variables()]
  assert names[:4] == ["conv1/conv1_1/weights", "conv1/conv1_1/biases",
                       "conv1/conv1_2/weights", "conv1/conv1_2/biases"]
  assert "fc/fc_2/weights" in names and fc.get_shape().as_list() == [1, 6]
  end_points = slim.utils.convert_collection_to_dict(collection)
  assert list(end_points) == ["conv1/conv1_1", "conv1/conv1_2"]
  assert end_points["conv1/conv1_2"] is net


# --- variables and checkpoints ---------------------------------------------------------------


def test_model_variables_devices_and_restore_selection(tmp_path):
  with slim.arg_scope([slim.model_variable], device="/device:CPU:0"):
    w = slim.model_variable("net/w", [2], initializer=tf.constant_initializer(3.0))
  v = slim.variable("net/other", [1], initializer=tf.zeros_initializer())
  logits = slim.model_variable("logits/w", [2], initializer=tf.ones_initializer())
  assert w.device.endswith("CPU:0") and slim.get_model_variables() == [w, logits]
  assert v in tf.global_variables() and v not in slim.get_model_variables()
  assert slim.get_variables_to_restore(exclude=["logits"]) == [w, v]
  assert slim.get_variables_to_restore(include=["net/w"]) == [w]
  assert slim.get_unique_variable("net/w") is w
  assert slim.get_variables_by_name("w") == [w, logits]
  with pytest.raises(ValueError, match="Couldn't find"):
    slim.get_unique_variable("nothing")
  with pytest.raises(TypeError, match="not a list"):
    slim.get_variables_to_restore(include="net")
  path = str(tmp_path / "model.ckpt")
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    tf.train.Saver([w]).save(sess, path)
  init_fn = slim.assign_from_checkpoint_fn(path, [w, logits], ignore_missing_vars=True)
  with tf.Session() as sess:
    sess.run(tf.variables_initializer([w, logits]))
    sess.run(tf.assign(w, [0.0, 0.0]))
    init_fn(sess)
    np.testing.assert_array_equal(sess.run(w), [3.0, 3.0])
  with pytest.raises(Exception, match="logits/w"):
    strict = slim.assign_from_checkpoint_fn(path, [w, logits])
    with tf.Session() as sess:
      strict(sess)


def test_variance_scaling_initializer_matches_tf_contrib():
  init = slim.variance_scaling_initializer(factor=2.0, mode="FAN_IN", uniform=True)
  v = slim.variable("v", [3, 3, 50, 64], initializer=init)
  x = slim.variable("x", [300, 200], initializer=slim.xavier_initializer(uniform=False))
  got, gx = _run([v, x])
  limit = np.sqrt(3.0 * 2.0 / (3 * 3 * 50))
  assert np.abs(got).max() <= limit and np.abs(got).max() > 0.95 * limit
  assert abs(gx.std() - np.sqrt(1.3 / 250) * 0.88) < 0.005  # truncated at 2 stddev
  with pytest.raises(TypeError, match="mode"):
    slim.variance_scaling_initializer(mode="fan_in")


# --- training and evaluation -----------------------------------------------------------------


def _toy_problem():
  rng = np.random.RandomState(7)
  xv = rng.randn(256, 4).astype(np.float32)
  yv = (xv @ [1.0, -2.0, 0.5, 0.0] > 0).astype(np.int64)
  x, y = tf.constant(xv), tf.constant(yv)
  logits = slim.fully_connected(slim.fully_connected(x, 8, scope="h"), 2, activation_fn=None,
                                scope="out")
  slim.losses.sparse_softmax_cross_entropy(logits, y)
  return logits, y


def test_learning_train_checkpoints_resumes_and_reports_loss(tmp_path):
  logdir = str(tmp_path / "train")
  _toy_problem()
  total = slim.losses.get_total_loss()
  train_op = slim.learning.create_train_op(total, tf.train.AdamOptimizer(0.05))
  assert train_op in tf.get_collection(tf.GraphKeys.TRAIN_OP)
  first = slim.learning.train(train_op, logdir, number_of_steps=30, log_every_n_steps=10)
  assert tf.train.latest_checkpoint(logdir).endswith("-30")
  second = slim.learning.train(train_op, logdir, number_of_steps=80)
  assert tf.train.latest_checkpoint(logdir).endswith("-80")
  assert second < first < 0.75


def test_learning_train_stops_on_nan_loss(tmp_path):
  x = slim.variable("x", [], initializer=tf.constant_initializer(1.0))
  loss = tf.log(x - 1.0) * 0.0 + tf.sqrt(x - 2.0)
  train_op = slim.learning.create_train_op(loss, tf.train.GradientDescentOptimizer(0.1))
  with pytest.raises(FloatingPointError, match="global step"):
    slim.learning.train(train_op, str(tmp_path), number_of_steps=5)


def test_create_train_op_runs_update_ops_and_needs_gradients():
  v = slim.variable("v", [], initializer=tf.zeros_initializer())
  counter = slim.variable("counter", [], initializer=tf.zeros_initializer(), trainable=False)
  tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, tf.assign_add(counter, 1.0))
  train_op = slim.learning.create_train_op(tf.square(v - 1.0),
                                           tf.train.GradientDescentOptimizer(0.1),
                                           clip_gradient_norm=0.05)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    loss = sess.run(train_op)
    assert loss == 1.0 and sess.run(counter) == 1.0
    np.testing.assert_allclose(sess.run(v), 0.005, rtol=1e-5)  # gradient clipped to 0.05
  with pytest.raises(ValueError, match="no gradient"):
    slim.learning.create_train_op(tf.constant(1.0) + 0.0,
                                  tf.train.GradientDescentOptimizer(0.1))


def test_evaluate_once_stops_at_the_end_of_the_input(tmp_path):
  w = slim.variable("w", [], initializer=tf.constant_initializer(2.0))
  path = str(tmp_path / "model.ckpt")
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    tf.train.Saver().save(sess, path)
  values = tf.data.Dataset.from_tensor_slices(np.arange(10, dtype=np.float32)).batch(4)
  batch = values.make_one_shot_iterator().get_next()
  value, update = slim.metrics.streaming_mean(batch * w)
  names_to_values, names_to_updates = slim.metrics.aggregate_metric_map(
      {"mean": (value, update)})
  got = slim.evaluation.evaluate_once("", path, None, num_evals=100,
                                      eval_op=list(names_to_updates.values()),
                                      final_op=names_to_values)
  np.testing.assert_allclose(got["mean"], 9.0)
  with pytest.raises(ValueError, match="no checkpoint"):
    slim.evaluation.evaluate_once("", str(tmp_path / "missing"), None)


# --- data ------------------------------------------------------------------------------------


def _write_images(path, n):
  rng = np.random.RandomState(8)
  images = rng.randint(0, 256, size=(n, 4, 5, 1)).astype(np.uint8)
  with tf.Graph().as_default(), tf.Session() as sess:
    ph = tf.placeholder(tf.uint8, [4, 5, 1])
    png = tf.image.encode_png(ph)
    encoded = [sess.run(png, {ph: im}) for im in images]
  from recflow.contrib.slim.datasets import dataset_utils
  with tf.python_io.TFRecordWriter(path) as writer:
    for i, data in enumerate(encoded):
      writer.write(dataset_utils.image_to_tfexample(data, "png", 4, 5, i).SerializeToString())
  return images


def _dataset(path, n):
  keys_to_features = {
      "image/encoded": tf.FixedLenFeature((), tf.string, default_value=""),
      "image/format": tf.FixedLenFeature((), tf.string, default_value="png"),
      "image/class/label": tf.FixedLenFeature([], tf.int64, default_value=0),
  }
  decoder = slim.tfexample_decoder.TFExampleDecoder(keys_to_features, {
      "image": slim.tfexample_decoder.Image(shape=[4, 5, 1], channels=1),
      "label": slim.tfexample_decoder.Tensor("image/class/label"),
  })
  return slim.dataset.Dataset(data_sources=path, reader=None, decoder=decoder, num_samples=n,
                              items_to_descriptions={}, num_classes=n)


def test_dataset_data_provider_decodes_pngs_in_order_and_in_batches(tmp_path):
  path = str(tmp_path / "images.tfrecord")
  images = _write_images(path, 6)
  dataset = _dataset(path, 6)
  assert dataset.num_classes == 6
  provider = slim.dataset_data_provider.DatasetDataProvider(dataset, shuffle=False,
                                                            num_epochs=1)
  image, label = provider.get(["image", "label"])
  assert provider.get(["label"])[0] is label and provider.num_samples() == 6
  batch_image, batch_label = provider.get_batch(
      ["image", "label"], 4, preprocess_fn=lambda im, lab: (tf.to_float(im) / 255.0, lab))
  with tf.Session() as sess:
    first, first_label = sess.run([image, label])
    b1, l1 = sess.run([batch_image, batch_label])
    b2, l2 = sess.run([batch_image, batch_label])
    with pytest.raises(tf.errors.OutOfRangeError):
      sess.run(batch_label)
  np.testing.assert_array_equal(first, images[0])
  assert first_label == 0
  np.testing.assert_array_equal(l1, [0, 1, 2, 3])
  np.testing.assert_array_equal(l2, [4, 5])
  np.testing.assert_allclose(b1, images[:4] / 255.0, rtol=1e-6)
  with pytest.raises(ValueError, match="not provided"):
    provider.get(["mask"])


def test_data_errors_name_the_culprit(tmp_path):
  with pytest.raises(ValueError, match="lacks"):
    slim.tfexample_decoder.TFExampleDecoder(
        {"a": tf.FixedLenFeature([], tf.int64)},
        {"label": slim.tfexample_decoder.Tensor("image/class/label")})
  dataset = _dataset(str(tmp_path / "none-*.tfrecord"), 1)
  with pytest.raises(ValueError, match="no file matches"):
    slim.dataset_data_provider.DatasetDataProvider(dataset)
  path = str(tmp_path / "bad.tfrecord")
  from recflow.contrib.slim.datasets import dataset_utils
  with tf.python_io.TFRecordWriter(path) as writer:
    writer.write(dataset_utils.image_to_tfexample(b"not a png", "png", 4, 5, 0)
                 .SerializeToString())
  provider = slim.dataset_data_provider.DatasetDataProvider(_dataset(path, 1), shuffle=False)
  image, = provider.get(["image"])
  with tf.Session() as sess:
    with pytest.raises(tf.errors.OpError, match="(?i)image|png"):
      sess.run(image)


# --- model_deploy ----------------------------------------------------------------------------


def test_model_deploy_clones_share_variables_and_sum_gradients():
  xv = np.random.RandomState(9).randn(4, 3).astype(np.float32)
  config = model_deploy.DeploymentConfig(num_clones=2)
  halves = [tf.constant(xv[:2]), tf.constant(xv[2:])]

  def model_fn(i):
    out = slim.fully_connected(halves[i], 1, activation_fn=None, scope="fc",
                               weights_initializer=tf.constant_initializer(0.5))
    tf.losses.mean_squared_error(tf.zeros_like(out), out)
    return out

  clones = []
  with slim.arg_scope([slim.model_variable, slim.variable], device=config.variables_device()):
    for i in range(2):
      with tf.name_scope(config.clone_scope(i)) as scope:
        with tf.variable_scope(tf.get_variable_scope(), reuse=True if i else None):
          clones.append(model_deploy.Clone(model_fn(i), scope, config.clone_device(i)))
  assert [c.scope for c in clones] == ["clone_0/", "clone_1/"]
  assert len(slim.get_model_variables()) == 2
  optimizer = tf.train.GradientDescentOptimizer(1.0)
  total, grads = model_deploy.optimize_clones(clones, optimizer)
  w = slim.get_variables("fc/weights")[0]
  grad_w = dict((v, g) for g, v in grads)[w]
  whole = tf.reduce_mean(tf.square(tf.matmul(tf.constant(xv), w) + slim.get_variables(
      "fc/biases")[0]))
  total_v, grad_v, want = _run([total, grad_w, tf.gradients(whole, w)[0]])
  np.testing.assert_allclose(total_v, _run(whole), rtol=1e-5)
  np.testing.assert_allclose(grad_v, want, rtol=1e-5)


def test_model_deploy_devices():
  config = model_deploy.DeploymentConfig(num_clones=1, num_ps_tasks=2)
  assert config.clone_device(0) == "/job:worker/device:CPU:0"
  assert config.clone_scope(0) == ""
  chooser = config.variables_device()
  with tf.device(chooser):
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(1.0, name="b")
    c = tf.Variable(1.0, name="c")
  assert [v.device for v in (a, b, c)] == ["/job:ps/task:0/device:CPU:0",
                                           "/job:ps/task:1/device:CPU:0",
                                           "/job:ps/task:0/device:CPU:0"]
  with pytest.raises(ValueError, match="num_ps_tasks"):
    model_deploy.DeploymentConfig(num_replicas=2)
  with pytest.raises(ValueError, match="clone_index"):
    config.clone_device(1)


def test_model_deploy_deploy_trains():
  xv = np.random.RandomState(10).randn(8, 3).astype(np.float32)

  def model_fn():
    out = slim.fully_connected(tf.constant(xv), 1, activation_fn=None, scope="fc")
    tf.losses.mean_squared_error(tf.ones_like(out), out)
    return out

  model = model_deploy.deploy(model_deploy.DeploymentConfig(num_clones=2), model_fn,
                              optimizer=tf.train.GradientDescentOptimizer(0.1))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    losses = [sess.run(model.train_op) for _ in range(20)]
    assert sess.run(tf.train.get_global_step()) == 20
  assert losses[-1] < losses[0]


# --- nets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,size,kwargs,end_point", [
    ("lenet", 28, {"dropout_keep_prob": 1.0}, "fc3"),
    ("cifarnet", 32, {"dropout_keep_prob": 1.0}, "fc4"),
    ("mobilenet_v1_025", 64, {"dropout_keep_prob": 1.0}, "Conv2d_13_pointwise"),
    ("resnet_v1_50", 64, {"depth_multiplier": 0.125}, "resnet_v1_50/block4"),
])
def test_nets_build_run_and_train(name, size, kwargs, end_point):
  # No dropout and a fixed seed: the losses before and after are of the same computation.
  tf.set_random_seed(3)
  network_fn = nets_factory.get_network_fn(name, num_classes=5, weight_decay=1e-4,
                                           is_training=True)
  assert network_fn.default_image_size in (28, 32, 224)
  images = tf.constant(np.random.RandomState(11).rand(2, size, size, 3).astype(np.float32))
  logits, end_points = network_fn(images, **kwargs)
  assert logits.get_shape().as_list() == [2, 5] and end_point in end_points
  loss = tf.losses.softmax_cross_entropy(tf.one_hot([1, 3], 5), logits)
  train_op = slim.learning.create_train_op(tf.losses.get_total_loss(),
                                           tf.train.GradientDescentOptimizer(0.001))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    before = sess.run(loss)
    for _ in range(8):
      sess.run(train_op)
    after = sess.run(loss)
  assert np.isfinite(before) and after < before


def test_net_variable_names_follow_tf_slim():
  network_fn = nets_factory.get_network_fn("mobilenet_v1", num_classes=10)
  network_fn(tf.zeros([1, 224, 224, 3]))
  names = set(v.op.name for v in slim.get_model_variables())
  for expected in ("MobilenetV1/Conv2d_0/weights", "MobilenetV1/Conv2d_0/BatchNorm/gamma",
                   "MobilenetV1/Conv2d_1_depthwise/depthwise_weights",
                   "MobilenetV1/Conv2d_13_pointwise/BatchNorm/moving_variance",
                   "MobilenetV1/Logits/Conv2d_1c_1x1/biases"):
    assert expected in names
  assert len(tf.trainable_variables()) == 83  # as in TF-slim's MobileNet v1


def test_resnet_output_stride_and_conv2d_same():
  blocks = [resnet_utils.Block("block1", lambda net, rate, depth, stride: slim.conv2d(
      net, depth, 3, stride=stride, rate=rate), [{"depth": 4, "stride": 2}] * 2)]
  x = tf.zeros([1, 16, 16, 3])
  with pytest.raises(ValueError, match="output_stride"):
    with tf.variable_scope("bad"):
      resnet_utils.stack_blocks_dense(x, blocks, output_stride=3)
  y = resnet_utils.stack_blocks_dense(x, blocks, output_stride=2)
  assert y.get_shape().as_list() == [1, 8, 8, 4]
  same = resnet_utils.conv2d_same(tf.zeros([1, 7, 7, 2]), 3, 3, stride=2)
  assert same.get_shape().as_list() == [1, 4, 4, 3]


def test_nets_factory_registration():
  with pytest.raises(ValueError, match="unknown"):
    nets_factory.get_network_fn("alexnet", 10)
  with pytest.raises(ValueError, match="already registered"):
    nets_factory.register_network("lenet", lambda *a, **k: None, lambda **k: {})
  calls = []

  def tiny(images, num_classes=3, is_training=False):
    calls.append((num_classes, is_training))
    return slim.fully_connected(slim.flatten(images), num_classes), {}

  def tiny_scope(weight_decay=0.0):
    with slim.arg_scope([slim.fully_connected], activation_fn=None) as sc:
      return sc

  nets_factory.register_network("tiny_test_net", tiny, tiny_scope)
  try:
    logits, _ = nets_factory.get_network_fn("tiny_test_net", 3, is_training=True)(
        tf.zeros([2, 2, 2, 1]))
    assert calls == [(3, True)] and logits.op.type in ("BiasAdd", "Add", "AddV2")
  finally:
    del nets_factory.networks_map["tiny_test_net"]
    del nets_factory.arg_scopes_map["tiny_test_net"]


def test_tf_contrib_slim_is_reachable():
  assert tf.contrib.slim.conv2d is slim.conv2d
  assert tf.contrib.framework.arg_scope is slim.arg_scope
  assert tf.contrib.layers.xavier_initializer is slim.xavier_initializer


def test_model_deploy_on_ps_tasks_trains_with_learning_train(tmp_path):
  """Variables round robin on two in-process ps tasks, a clone on the worker, trained by
  slim.learning.train against the worker's target (the train op is fetched, as TF-slim
  does, and runs as a distributed step); the checkpoint holds the ps values."""
  from test_distributed import free_ports
  ports = free_ports(3)
  cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:%d" % p for p in ports[:2]],
                                  "worker": ["127.0.0.1:%d" % ports[2]]})
  servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "ps", 1)]
  chief = tf.train.Server(cluster, "worker", 0)
  xv = np.random.RandomState(12).randn(64, 4).astype(np.float32)
  yv = (xv @ [1.0, -1.0, 0.5, 2.0]).astype(np.float32)[:, None]
  try:
    with tf.Graph().as_default():
      config = model_deploy.DeploymentConfig(num_ps_tasks=2)
      batches = tf.data.Dataset.from_tensor_slices((xv, yv)).repeat().batch(32)
      with tf.device(config.inputs_device()):
        iterator = batches.make_one_shot_iterator()

      def model_fn():
        x, y = iterator.get_next()
        hidden = slim.fully_connected(x, 8, scope="h")
        out = slim.fully_connected(hidden, 1, activation_fn=None, scope="out")
        tf.losses.mean_squared_error(y, out)

      model = model_deploy.deploy(config, model_fn, optimizer=tf.train.AdamOptimizer(0.05))
      devices = sorted(set(v.device for v in slim.get_model_variables()))
      assert devices == ["/job:ps/task:0/device:CPU:0", "/job:ps/task:1/device:CPU:0"]
      # One job: the chief's MonitoredTrainingSession ends it on close.
      last = slim.learning.train(model.train_op, str(tmp_path), master=chief.target,
                                 number_of_steps=60, save_summaries_secs=None)
    assert last < 1.5, last  # predicting 0 costs the targets' variance, about 6
    path = tf.train.latest_checkpoint(str(tmp_path))
    assert path.endswith("-60")
    assert "out/weights" in [name for name, _ in tf.train.list_variables(path)]
  finally:
    chief.stop()
    for s in servers:
      s.stop()
