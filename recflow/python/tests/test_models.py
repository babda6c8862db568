"""recflow.models: the zoo built into the Python graph from a config dict, trained
from Python (the zoo's optimizers or the user's), fed from placeholders or from
recflow's C++ Criteo pipeline."""

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow import embedding
from recflow import models

B = 64
DENSE = 3
FIELDS = 4


def _config(model_type, **model):
  sparse = FIELDS
  m = {"type": model_type, "embedding_dim": 4, "hidden_units": [8], "seed": 3}
  if model_type == "din":
    sparse = ["C%d" % (i + 1) for i in range(FIELDS)] + [{"name": "H1", "sequence_of": "C1"}]
    m["attention_units"] = [4]
  if model_type == "two_tower":
    m.update(user_features=["I1", "I2", "I3", "C1", "C2"], item_features=["C3", "C4"],
             tower_dim=4, temperature=0.5)
  if model_type == "dlrm":
    m["bottom_units"] = [8]
  m.update(model)
  return {"model": m,
          "features": {"dense": DENSE, "sparse": sparse,
                       "sparse_defaults": {"vocabulary_size": 50, "combiner": "sum"}},
          "optimizer": {"embedding": {"type": "adagrad", "learning_rate": 0.1},
                        "dense": {"type": "adam", "learning_rate": 0.01}}}


def _feed(m, rng, hist=False):
  """Random inputs whose label depends on C1's id, for every feature of m."""
  feed = {}
  c1 = rng.randint(0, 20, size=B)
  for name, t in m.features.items():
    if name == "labels":
      feed[t] = (c1 % 2).astype(np.float32)
    elif name == "dense":
      feed[t] = rng.rand(B, DENSE).astype(np.float32)
    elif name.endswith("/ids"):
      field = name.split("/")[0]
      counts = rng.randint(1, 4, size=B) if field == "H1" else np.ones(B, np.int64)
      ids = c1 if field == "C1" else rng.randint(0, 1 << 40, size=int(counts.sum()))
      feed[t] = np.asarray(ids, np.int64)
      feed[m.features[field + "/row_splits"]] = np.concatenate([[0], np.cumsum(counts)])
  return feed


@pytest.mark.parametrize("model_type", models.MODEL_TYPES)
def test_each_model_builds_and_training_lowers_the_loss(model_type):
  m = models.build(_config(model_type))
  assert m.model_type == model_type
  assert m.logits.get_shape().as_list() == [None]
  assert m.train_op is not None and m.global_step is not None
  assert tf.train.get_global_step() is m.global_step
  assert all(isinstance(v, tf.Variable) for v in m.dense_variables)
  assert set(m.dense_variables) <= set(tf.trainable_variables())
  feed = _feed(m, np.random.RandomState(7))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(m.loss, feed)
    for _ in range(25):
      sess.run(m.train_op, feed)
    last, probs, step = sess.run([m.loss, m.probabilities, m.global_step], feed)
  assert step == 25
  assert last < first, (model_type, first, last)
  assert np.all((probs >= 0) & (probs <= 1))


def test_own_loss_and_optimizer_over_the_zoo_with_hash_tables(tmp_path):
  config = _config("deepfm")
  config["features"]["sparse_defaults"] = {"hash_table": True, "combiner": "sum"}
  config["optimizer"]["embedding"] = {"type": "sgd", "learning_rate": 0.1}
  m = models.build(config, trainable=False)
  assert m.train_op is None and m.global_step is None
  assert len(m.tables) == 2 * FIELDS  # deepfm: an embedding and a first-order table per field
  assert all(isinstance(t, embedding.HashEmbeddingTable) for t in m.tables)
  assert set(m.tables) == set(embedding.hash_tables())
  labels = m.labels
  loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                                logits=m.logits))
  gs = tf.train.get_or_create_global_step()
  train = tf.train.GradientDescentOptimizer(0.2).minimize(loss, global_step=gs)
  feed = _feed(m, np.random.RandomState(8))
  saver = tf.train.Saver()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss, feed)
    for _ in range(30):
      sess.run(train, feed)
    last = sess.run(loss, feed)
    probs = sess.run(m.probabilities, feed)
    path = saver.save(sess, str(tmp_path / "ckpt"), global_step=gs)
  assert last < first
  reader = tf.train.NewCheckpointReader(path)
  assert reader.has_tensor(m.tables[0].name + "/keys")
  tf.reset_default_graph()
  m2 = models.build(config, trainable=False)
  with tf.Session() as sess:
    tf.train.Saver().restore(sess, path)
    np.testing.assert_allclose(sess.run(m2.probabilities,
                                        {m2.features[k]: v for k, v in
                                         ((n, feed[m.features[n]]) for n in m.features)}),
                               probs, rtol=1e-5)


def _write_criteo(path, rng, rows):
  with open(path, "w") as f:
    for _ in range(rows):
      c1 = rng.randint(0, 20)
      dense = [str(rng.randint(0, 9)) for _ in range(13)]
      cats = ["%08x" % c1] + ["%08x" % rng.randint(0, 1 << 31) if rng.rand() < 0.9 else ""
                              for _ in range(25)]
      f.write("\t".join([str(c1 % 2)] + dense + cats) + "\n")


def test_batches_feed_the_zoo_as_recflow_train_reads_them(tmp_path):
  data = str(tmp_path / "train.tsv")
  _write_criteo(data, np.random.RandomState(9), 700)
  with open(data, "a") as f:
    f.write("not\ta criteo line\n")
  config = {"model": {"type": "lr"}, "features": {"dense": 13, "sparse": 26},
            "optimizer": {"embedding": {"type": "adagrad", "learning_rate": 0.2},
                          "dense": {"type": "adam", "learning_rate": 0.05}},
            "data": {"format": "criteo"}, "train": {"batch_size": 128}}
  names = [n for n, _, _ in models.schema(config)]
  assert names[:4] == ["labels", "dense", "C1/ids", "C1/row_splits"]
  batch = models.batch_placeholders(config)
  m = models.build(config, batch=batch)
  losses = []
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for epoch in range(3):
      reader = models.Batches(config, data)
      seen = 0
      for b in reader:
        assert len(b) == len(names)
        loss, _ = sess.run([m.loss, m.train_op], models.feed_dict(batch, b))
        losses.append(loss)
        seen += len(b[0])
      assert seen == 700 and reader.bad_records() == 1
  assert np.mean(losses[-6:]) < np.mean(losses[:6])
  forever = models.Batches(config, data, epochs=0)  # <= 0: repeats
  assert sum(len(next(forever)[0]) for _ in range(12)) == 2 * 700  # two epochs of 6 batches
  forever.close()


def test_bad_configs_name_the_key():
  with pytest.raises(tf.errors.InvalidArgumentError, match="type"):
    models.build({"model": {"type": "nope"}, "features": {"dense": 1, "sparse": 1}})
  with pytest.raises(tf.errors.InvalidArgumentError, match="bogus"):
    models.build({"model": {"type": "lr", "bogus": 1}, "features": {"dense": 1, "sparse": 1}})
  with pytest.raises(TypeError, match="config must be"):
    models.build(42)
  with pytest.raises(ValueError, match="does not exist"):
    models.build("/nonexistent/config.yaml")
  with pytest.raises(tf.errors.NotFoundError):
    models.Batches({"model": {"type": "lr"}, "features": {"dense": 13, "sparse": 26}},
                   "/nonexistent/*.tsv")
  # The graph is still usable after a refused config.
  m = models.build(_config("lr"))
  assert m.loss.dtype == tf.float32
