"""examples/python/deepfm.py end to end: `recflow gen-data` files, training under
MonitoredTrainingSession with checkpoints, SavedModel export, `recflow serve`,
and a REST predict that matches the exported model run from Python."""

import glob
import importlib.util
import os
import subprocess

import numpy as np

import recflow.compat.v1 as tf

import serving_util


def _example():
  src = os.environ.get("RECFLOW_SOURCE_DIR") or os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
  path = os.path.join(src, "examples", "python", "deepfm.py")
  spec = importlib.util.spec_from_file_location("deepfm_example", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_deepfm_example_trains_exports_and_is_served(tmp_path):
  cli = serving_util.cli_or_skip()
  data = tmp_path / "data"
  subprocess.run([cli, "gen-data", "--rows", "3000", "--test_rows", "200", "--seed", "2",
                  "--out", str(data)], check=True, capture_output=True)
  example = _example()
  model_dir, base = tmp_path / "model", tmp_path / "serving"
  args = ["--train", str(data / "train-*"), "--model_dir", str(model_dir),
          "--export_dir", str(base / "1"), "--steps", "40", "--batch_size", "256",
          "--buckets", "500", "--dim", "4", "--hidden_units", "16", "--save_steps", "20",
          "--log_every", "10", "--learning_rate", "0.01"]
  assert example.main(args) == 0
  ckpt = tf.train.latest_checkpoint(str(model_dir))
  assert ckpt is not None and ckpt.endswith("-40")
  assert glob.glob(str(model_dir / "model.ckpt-20.index"))  # CheckpointSaverHook every 20

  # Test rows through the example's own input function, and the expected
  # probabilities from the exported model run in Python.
  test_file = glob.glob(str(data / "test-*"))[0]
  with tf.Graph().as_default(), tf.Session() as sess:
    labels, dense, ids = sess.run(example.input_fn(test_file, 50, 1))
  assert set(np.unique(labels)) <= {0.0, 1.0} and 0 < labels.mean() < 1
  assert np.all(ids[:, 0] > 0)  # gen-data writes every C1
  assert dense.shape == (50, 13) and ids.shape == (50, 26) and ids.dtype == np.int64
  with tf.Graph().as_default(), tf.Session() as sess:
    mg = tf.saved_model.loader.load(sess, ["serve"], str(base / "1"))
    sig = mg.signature_def["serving_default"]
    expected = sess.run(sig.outputs["probabilities"].name,
                        {sig.inputs["dense"].name: dense, sig.inputs["ids"].name: ids})
  assert expected.shape == (50,) and np.all((expected > 0) & (expected < 1))

  with serving_util.Server("deepfm", base) as server:
    body = server.predict({"inputs": {"dense": dense.tolist(), "ids": ids.tolist()}})
  got = np.array(body["outputs"], dtype=np.float32).reshape(-1)
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
