"""Learning-rate decays against their formulas; clip_by_norm, global_norm,
clip_by_global_norm."""

import math

import numpy as np
import pytest

import recflow.compat.v1 as tf

STEPS = [0, 1, 5, 10, 13, 20, 25, 40, 100]


def values_over_steps(make):
  step = tf.placeholder(tf.int64, [])
  lr = make(step)
  with tf.Session() as sess:
    return [float(sess.run(lr, {step: s})) for s in STEPS]


def check(make, formula, rtol=1e-6):
  got = values_over_steps(make)
  np.testing.assert_allclose(got, [formula(s) for s in STEPS], rtol=rtol, atol=1e-9)


@pytest.mark.parametrize("staircase", [False, True])
def test_exponential_decay(staircase):
  f = (lambda s: 0.1 * 0.5 ** (s // 10)) if staircase else (lambda s: 0.1 * 0.5 ** (s / 10))
  check(lambda g: tf.train.exponential_decay(0.1, g, 10, 0.5, staircase=staircase), f)


@pytest.mark.parametrize("staircase", [False, True])
def test_natural_exp_and_inverse_time_decay(staircase):
  p = (lambda s: s // 10) if staircase else (lambda s: s / 10)
  check(lambda g: tf.train.natural_exp_decay(0.1, g, 10, 0.3, staircase=staircase),
        lambda s: 0.1 * math.exp(-0.3 * p(s)))
  tf.reset_default_graph()
  check(lambda g: tf.train.inverse_time_decay(0.1, g, 10, 0.3, staircase=staircase),
        lambda s: 0.1 / (1 + 0.3 * p(s)))


def test_polynomial_decay():
  def f(s, power=1.0):
    s = min(s, 20)
    return (0.1 - 0.01) * (1 - s / 20) ** power + 0.01
  check(lambda g: tf.train.polynomial_decay(0.1, g, 20, 0.01), f)
  tf.reset_default_graph()
  check(lambda g: tf.train.polynomial_decay(0.1, g, 20, 0.01, power=2.0), lambda s: f(s, 2.0))


def test_polynomial_decay_cycle():
  def f(s):
    steps = 20 * (1 if s == 0 else math.ceil(s / 20))
    return (0.1 - 0.01) * (1 - s / steps) ** 0.5 + 0.01
  check(lambda g: tf.train.polynomial_decay(0.1, g, 20, 0.01, power=0.5, cycle=True), f,
        rtol=2e-6)


def test_cosine_decay():
  def f(s, alpha):
    s = min(s, 40)
    return 0.1 * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * s / 40)) + alpha)
  check(lambda g: tf.train.cosine_decay(0.1, g, 40), lambda s: f(s, 0.0), rtol=1e-5)
  tf.reset_default_graph()
  check(lambda g: tf.train.cosine_decay(0.1, g, 40, alpha=0.2), lambda s: f(s, 0.2), rtol=1e-5)


def test_piecewise_constant():
  def f(s):
    return 1.0 if s <= 5 else 0.5 if s <= 20 else 0.1
  check(lambda g: tf.train.piecewise_constant(g, [5, 20], [1.0, 0.5, 0.1]), f)
  with pytest.raises(ValueError):
    tf.train.piecewise_constant(tf.constant(1), [5], [1.0])


def test_decay_needs_a_global_step():
  with pytest.raises(ValueError, match="global_step is required"):
    tf.train.exponential_decay(0.1, None, 10, 0.5)


def test_decayed_rate_drives_an_optimizer():
  step = tf.train.get_or_create_global_step()
  lr = tf.train.exponential_decay(1.0, step, 1, 0.5, staircase=True)
  w = tf.Variable(0.0)
  train = tf.train.GradientDescentOptimizer(lr).minimize(-w, global_step=step)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(3):
      sess.run(train)
    assert sess.run(w) == pytest.approx(1.0 + 0.5 + 0.25)
    assert sess.run(step) == 3


def test_clip_by_norm():
  t = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
  with tf.Session() as sess:
    np.testing.assert_allclose(sess.run(tf.clip_by_norm(t, 1.0)), t / 5.0, rtol=1e-6)
    np.testing.assert_allclose(sess.run(tf.clip_by_norm(t, 10.0)), t, rtol=1e-6)
    np.testing.assert_allclose(sess.run(tf.clip_by_norm(t, 1.0, axes=[1])),
                               [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(sess.run(tf.clip_by_value(t, 1.0, 3.5)),
                               [[3.0, 3.5], [1.0, 1.0]])


def test_global_norm_and_clip_by_global_norm():
  a = np.array([1.0, 2.0, 2.0], np.float32)  # norm 3
  b = np.array([[4.0]], np.float32)          # norm 4
  norm = 5.0
  ta, tb = tf.constant(a), tf.constant(b)
  sl = tf.IndexedSlices(tf.constant([[3.0, 4.0]]), tf.constant([1]), tf.constant([2, 2]))
  clipped, gn = tf.clip_by_global_norm([ta, None, tb], 2.5)
  clipped_big, _ = tf.clip_by_global_norm([ta, tb], 10.0)
  clipped_sl, gn_sl = tf.clip_by_global_norm([ta, sl], 2.5)
  with tf.Session() as sess:
    assert sess.run(tf.global_norm([ta, tb])) == pytest.approx(norm)
    va, vb, vn = sess.run([clipped[0], clipped[2], gn])
    assert clipped[1] is None
    assert vn == pytest.approx(norm)
    np.testing.assert_allclose(va, a * 0.5, rtol=1e-6)
    np.testing.assert_allclose(vb, b * 0.5, rtol=1e-6)
    np.testing.assert_allclose(sess.run(clipped_big[0]), a, rtol=1e-6)
    assert isinstance(clipped_sl[1], tf.IndexedSlices)
    assert sess.run(gn_sl) == pytest.approx(math.sqrt(9 + 25))
    np.testing.assert_allclose(sess.run(clipped_sl[1].values),
                               np.array([[3.0, 4.0]]) * 2.5 / math.sqrt(34), rtol=1e-6)
    inf_clipped, _ = tf.clip_by_global_norm([tf.constant([np.inf, 1.0])], 1.0)
    assert np.isnan(sess.run(inf_clipped[0])).all()
  with pytest.raises(TypeError):
    tf.clip_by_global_norm(ta, 1.0)


def test_clipped_gradients_train():
  w = tf.Variable([10.0, -10.0])
  opt = tf.train.GradientDescentOptimizer(1.0)
  grads, tvars = zip(*opt.compute_gradients(tf.reduce_sum(tf.square(w))))
  clipped, _ = tf.clip_by_global_norm(grads, 1.0)
  train = opt.apply_gradients(zip(clipped, tvars))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    np.testing.assert_allclose(sess.run(w), [10.0 - 0.5 ** 0.5, -10.0 + 0.5 ** 0.5], rtol=1e-6)


def test_global_step_helpers():
  assert tf.train.get_global_step() is None
  step = tf.train.get_or_create_global_step()
  assert tf.train.get_global_step() is step
  assert tf.train.get_or_create_global_step() is step
  assert step.op.name == "global_step" and step.dtype.base_dtype == tf.int64
  with pytest.raises(ValueError, match="already exists"):
    tf.train.create_global_step()
  with pytest.raises(TypeError, match="integer"):
    tf.train.assert_global_step(tf.constant(1.0))
  with pytest.raises(TypeError, match="scalar"):
    tf.train.assert_global_step(tf.constant([1, 2]))
  with tf.Graph().as_default():
    tf.Variable(3, name="global_step", dtype=tf.int64)  # found by name
    assert tf.train.get_global_step().name == "global_step:0"
  with tf.Session() as sess:
    sess.run(step.initializer)
    assert tf.train.global_step(sess, step) == 0
