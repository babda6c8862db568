"""tf.train optimizers (Momentum, Adagrad, Adam, Ftrl) against NumPy references:
dense and sparse (IndexedSlices with duplicate indices) gradients, reference and
resource variables, slots and their names."""

import numpy as np
import pytest

import recflow.compat.v1 as tf

W0 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.75], [0.1, 0.2, 0.3]],
              np.float32)
GRADS = [np.array([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [-0.7, 0.8, 0.9], [1.0, -1.1, 1.2]],
                  np.float32) * (k + 1) for k in range(3)]
IDX = np.array([2, 0, 2, 3], np.int32)  # row 2 twice, row 1 never
SPARSE_VALUES = [np.array([[0.3, -0.1, 0.2], [0.5, 0.4, -0.3], [-0.2, 0.6, 0.1],
                           [0.7, -0.8, 0.9]], np.float32) * (k + 1) for k in range(3)]


# --- NumPy references (TF 1.x's kernels) -----------------------------------

def sgd_ref(lr):
  def step(w, s, g, t):
    return w - lr * g, s
  return step, {}


def momentum_ref(lr, mom, nesterov=False):
  def step(w, s, g, t):
    a = s["momentum"] * mom + g
    w = w - (lr * g + lr * mom * a if nesterov else lr * a)
    return w, {"momentum": a}
  return step, {"momentum": 0.0}


def adagrad_ref(lr, init=0.1):
  def step(w, s, g, t):
    acc = s["accumulator"] + g * g
    return w - lr * g / np.sqrt(acc), {"accumulator": acc}
  return step, {"accumulator": init}


def adam_ref(lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
  def step(w, s, g, t):
    lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    m = b1 * s["m"] + (1 - b1) * g
    v = b2 * s["v"] + (1 - b2) * g * g
    return w - lr_t * m / (np.sqrt(v) + eps), {"m": m, "v": v}
  return step, {"m": 0.0, "v": 0.0}


def ftrl_ref(lr, lr_power=-0.5, init=0.1, l1=0.0, l2=0.0, shrink=0.0):
  def step(w, s, g, t):
    acc, lin = s["accum"], s["linear"]
    g_shrunk = g + 2 * shrink * w
    new_acc = acc + g * g
    lin = lin + g_shrunk - (new_acc ** -lr_power - acc ** -lr_power) / lr * w
    quad = new_acc ** -lr_power / lr + 2 * l2
    w = np.where(np.abs(lin) > l1, (np.sign(lin) * l1 - lin) / quad, 0.0)
    return w, {"accum": new_acc, "linear": lin}
  return step, {"accum": init, "linear": 0.0}


def run_reference(ref, sparse, rows_all):
  """w and slots after each step; a sparse step sums duplicates and touches only
  the rows named unless rows_all (Adam: TF updates every row)."""
  step, slots0 = ref
  w = W0.astype(np.float64)
  s = {k: np.full(W0.shape, v, np.float64) for k, v in slots0.items()}
  for t in range(1, 4):
    if sparse:
      g = np.zeros(W0.shape)
      np.add.at(g, IDX, SPARSE_VALUES[t - 1].astype(np.float64))
      nw, ns = step(w, s, g, t)
      if rows_all:
        w, s = nw, ns
      else:
        rows = np.unique(IDX)
        w = w.copy()
        w[rows] = nw[rows]
        for k in s:
          s[k] = s[k].copy()
          s[k][rows] = ns[k][rows]
    else:
      w, s = step(w, s, GRADS[t - 1].astype(np.float64), t)
  return w, s


CASES = {
    "sgd": (lambda: tf.train.GradientDescentOptimizer(0.1), sgd_ref(0.1), False),
    "momentum": (lambda: tf.train.MomentumOptimizer(0.1, 0.9), momentum_ref(0.1, 0.9), False),
    "nesterov": (lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
                 momentum_ref(0.1, 0.9, nesterov=True), False),
    "adagrad": (lambda: tf.train.AdagradOptimizer(0.2, initial_accumulator_value=0.3),
                adagrad_ref(0.2, 0.3), False),
    "adam": (lambda: tf.train.AdamOptimizer(0.01), adam_ref(0.01), True),
    "ftrl": (lambda: tf.train.FtrlOptimizer(0.5, l1_regularization_strength=0.01,
                                            l2_regularization_strength=0.02),
             ftrl_ref(0.5, l1=0.01, l2=0.02), False),
    "ftrl_power_shrinkage": (
        lambda: tf.train.FtrlOptimizer(0.3, learning_rate_power=-0.7,
                                       initial_accumulator_value=0.5,
                                       l1_regularization_strength=0.05,
                                       l2_regularization_strength=0.1,
                                       l2_shrinkage_regularization_strength=0.2),
        ftrl_ref(0.3, lr_power=-0.7, init=0.5, l1=0.05, l2=0.1, shrink=0.2), False),
}


def build(name, sparse, use_resource):
  make_opt, _, _ = CASES[name]
  w = tf.Variable(W0, name="w", use_resource=use_resource)
  g = tf.placeholder(tf.float32, [4, 3], name="g")
  if sparse:
    loss = tf.reduce_sum(tf.gather(w, IDX) * g)
  else:
    loss = tf.reduce_sum(w * g)
  opt = make_opt()
  train = opt.minimize(loss)
  return w, g, opt, train


@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_optimizer_matches_numpy_reference(name, sparse, use_resource):
  w, g, opt, train = build(name, sparse, use_resource)
  if sparse:
    grads = opt.compute_gradients(tf.reduce_sum(tf.gather(w, IDX) * g), var_list=[w])
    assert isinstance(grads[0][0], tf.IndexedSlices)
  feeds = SPARSE_VALUES if sparse else GRADS
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for t in range(3):
      sess.run(train, {g: feeds[t]})
    got = sess.run(w)
    slots = {n: sess.run(opt.get_slot(w, n)) for n in opt.get_slot_names()}
  want_w, want_slots = run_reference(CASES[name][1], sparse, rows_all=CASES[name][2])
  np.testing.assert_allclose(got, want_w, rtol=2e-5, atol=2e-6)
  assert sorted(slots) == sorted(want_slots)
  for n in slots:
    np.testing.assert_allclose(slots[n], want_slots[n], rtol=2e-5, atol=2e-6, err_msg=n)


def test_slot_names_and_variable_names_follow_tf():
  w = tf.Variable(W0, name="w")
  b = tf.Variable(np.zeros([3], np.float32), name="b")
  loss = tf.reduce_sum(tf.matmul(tf.ones([1, 4]), w) + b)
  opt = tf.train.AdamOptimizer()
  opt.minimize(loss)
  assert opt.get_slot_names() == ["m", "v"]
  assert opt.get_slot(w, "m").op.name == "w/Adam"
  assert opt.get_slot(w, "v").op.name == "w/Adam_1"
  assert opt.get_slot(b, "m").op.name == "b/Adam"
  assert opt.get_slot(w, "nope") is None
  names = sorted(v.op.name for v in tf.global_variables())
  assert names == ["b", "b/Adam", "b/Adam_1", "beta1_power", "beta2_power", "w", "w/Adam",
                   "w/Adam_1"]
  assert [v.op.name for v in opt.variables()] == ["b/Adam", "b/Adam_1", "beta1_power",
                                                  "beta2_power", "w/Adam", "w/Adam_1"]
  assert not any(v.op.name.startswith(("beta", "w/", "b/")) for v in tf.trainable_variables())

  tf.reset_default_graph()
  w = tf.Variable(W0, name="w")
  for make, slots in [(lambda: tf.train.MomentumOptimizer(0.1, 0.9), {"momentum": "w/Momentum"}),
                      (lambda: tf.train.AdagradOptimizer(0.1), {"accumulator": "w/Adagrad"}),
                      (lambda: tf.train.FtrlOptimizer(0.1),
                       {"accum": "w/Ftrl", "linear": "w/Ftrl_1"})]:
    opt = make()
    opt.minimize(tf.reduce_sum(w * w))
    assert {n: opt.get_slot(w, n).op.name for n in opt.get_slot_names()} == slots


def test_adam_beta_powers_advance_each_step():
  w = tf.Variable(W0, name="w")
  opt = tf.train.AdamOptimizer(0.1, beta1=0.5, beta2=0.25)
  train = opt.minimize(tf.reduce_sum(w * w), global_step=tf.train.get_or_create_global_step())
  b1, b2 = opt._get_beta_accumulators()  # pylint: disable=protected-access
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    assert sess.run([b1, b2]) == pytest.approx([0.5, 0.25])
    sess.run(train)
    sess.run(train)
    assert sess.run([b1, b2]) == pytest.approx([0.125, 0.25 ** 3])
    assert sess.run(tf.train.get_global_step()) == 2


def test_learning_rate_may_be_a_tensor_or_callable():
  w = tf.Variable([1.0, 2.0], name="w")
  lr = tf.placeholder(tf.float32, [])
  train = tf.train.MomentumOptimizer(lr, momentum=lambda: 0.0).minimize(tf.reduce_sum(w))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train, {lr: 0.5})
    np.testing.assert_allclose(sess.run(w), [0.5, 1.5])


def test_apply_gradients_with_indexed_slices_directly():
  w = tf.Variable(np.zeros([3, 2], np.float32), name="w")
  grad = tf.IndexedSlices(tf.constant([[1.0, 1.0], [2.0, 2.0], [4.0, 4.0]]),
                          tf.constant([1, 1, 0]), tf.constant([3, 2]))
  opt = tf.train.AdagradOptimizer(1.0, initial_accumulator_value=0.01)
  train = opt.apply_gradients([(grad, w)])
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    # Duplicates summed before the update: row 1 sees g=3 once (not 1 then 2).
    np.testing.assert_allclose(sess.run(opt.get_slot(w, "accumulator")),
                               [[16.01, 16.01], [9.01, 9.01], [0.01, 0.01]], rtol=1e-6)
    np.testing.assert_allclose(sess.run(w)[1], -3.0 / np.sqrt(9.01) * np.ones(2), rtol=1e-6)


def test_bad_hyperparameters_raise_value_error():
  with pytest.raises(ValueError):
    tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
  with pytest.raises(ValueError):
    tf.train.FtrlOptimizer(0.1, learning_rate_power=0.5)
  with pytest.raises(ValueError):
    tf.train.FtrlOptimizer(0.1, l1_regularization_strength=-1.0)


def test_exponential_moving_average_and_variables_to_restore(tmp_path):
  w = tf.Variable([1.0, 2.0], name="w")
  b = tf.Variable(0.0, name="b", use_resource=True)
  step = tf.Variable(0, name="step", trainable=False)
  train = tf.train.GradientDescentOptimizer(1.0).minimize(-(tf.reduce_sum(w) + b))
  ema = tf.train.ExponentialMovingAverage(0.9)
  with tf.control_dependencies([train]):
    train_and_average = ema.apply([w, b])
  assert ema.average(w).op.name == "w/ExponentialMovingAverage"
  assert ema.average_name(b) == "b/ExponentialMovingAverage"
  assert w in tf.get_collection(tf.GraphKeys.MOVING_AVERAGE_VARIABLES)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    np.testing.assert_allclose(sess.run(ema.average(w)), [1.0, 2.0])
    want_w, want_avg = np.array([1.0, 2.0]), np.array([1.0, 2.0])
    for _ in range(3):
      sess.run(train_and_average)
      want_w = want_w + 1.0
      want_avg = want_avg - 0.1 * (want_avg - want_w)
    np.testing.assert_allclose(sess.run(w), want_w, rtol=1e-6)
    np.testing.assert_allclose(sess.run(ema.average(w)), want_avg, rtol=1e-6)
    path = tf.train.Saver().save(sess, str(tmp_path / "m"))
  names = ema.variables_to_restore()
  assert names["w/ExponentialMovingAverage"] is w
  assert names["step"] is step
  assert "w" not in names
  with tf.Session() as sess:
    tf.train.Saver(names).restore(sess, path)
    np.testing.assert_allclose(sess.run(w), want_avg, rtol=1e-6)
  with pytest.raises(ValueError, match="already computed"):
    ema.apply([w])


def test_exponential_moving_average_num_updates():
  v = tf.Variable(0.0, name="v")
  n = tf.placeholder(tf.int32, [])
  ema = tf.train.ExponentialMovingAverage(0.99, num_updates=n)
  update = ema.apply([v])
  assign = tf.assign(v, 10.0)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(assign)
    sess.run(update, {n: 0})  # decay min(0.99, 1/10) = 0.1
    assert sess.run(ema.average(v)) == pytest.approx(9.0)
