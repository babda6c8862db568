"""examples/python/slim end to end on the digits, briefly: convert, train LeNet with
model_deploy clones, evaluate, export, serve with `recflow serve` and classify over REST;
and a user's net from its own file. slow_test_slim_digits.py trains to the target
accuracy."""

import json
import os
import urllib.request

import numpy as np
import pytest

import recflow.compat.v1 as tf

import serving_util
import slim_example_util

pytest.importorskip("sklearn", reason="the digits come from scikit-learn (python3-sklearn)")


def _classify(server, examples):
  req = urllib.request.Request(
      "http://%s:%d/v1/models/%s:classify" % (server.host, server.port, server.name),
      data=json.dumps({"examples": examples}).encode(),
      headers={"Content-Type": "application/json"}, method="POST")
  with urllib.request.urlopen(req, timeout=60) as resp:
    return json.loads(resp.read().decode())


def test_train_eval_export_serve_classify(tmp_path, capsys):
  train = slim_example_util.load("train_image_classifier")
  data, train_dir, base = tmp_path / "digits", tmp_path / "train", tmp_path / "serving"
  assert train.main(["--dataset_dir", str(data), "--train_dir", str(train_dir),
                     "--max_number_of_steps", "80", "--num_clones", "2",
                     "--log_every_n_steps", "40", "--export_dir", str(base / "1")]) == 0
  out = capsys.readouterr().out
  accuracy = slim_example_util.accuracy_line(out)
  assert accuracy > 0.6, out  # 80 steps; the slow test trains to >= 0.97
  assert tf.train.latest_checkpoint(str(train_dir)).endswith("-80")
  assert sorted(os.listdir(data)) == ["digits_test.tfrecord", "digits_train.tfrecord",
                                      "labels.txt"]

  from recflow.contrib.slim.datasets import digits
  _, _, test_images, test_labels = digits.load_arrays()
  images = test_images[:20].astype(np.float32)
  with tf.Graph().as_default(), tf.Session() as sess:
    meta = tf.saved_model.loader.load(sess, ["serve"], str(base / "1"))
    sig = meta.signature_def["predict_images"]
    want = sess.run(sig.outputs["scores"].name, {sig.inputs["images"].name: images})
  assert want.shape == (20, 10)
  assert (want.argmax(1) == test_labels[:20]).mean() >= accuracy - 0.3

  examples = [{"pixels": im.reshape(-1).tolist()} for im in images]
  with serving_util.Server("digits", base) as server:
    body = _classify(server, examples)
  results = body["results"]
  assert len(results) == 20 and [label for label, _ in results[0]] == [str(i)
                                                                        for i in range(10)]
  got = np.array([[score for _, score in r] for r in results], dtype=np.float32)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_eval_script_and_a_users_net(tmp_path, capsys):
  train = slim_example_util.load("train_image_classifier")
  evaluate = slim_example_util.load("eval_image_classifier")
  nets = os.path.join(slim_example_util.example_dir(), "nets", "my_lenet.py")
  common = ["--dataset_dir", str(tmp_path / "digits"), "--nets_module", nets,
            "--model_name", "my_lenet"]
  assert train.main(common + ["--train_dir", str(tmp_path / "train"), "--no_eval",
                              "--max_number_of_steps", "30", "--optimizer", "adam",
                              "--learning_rate", "0.001"]) == 0
  from recflow.contrib.slim.nets import nets_factory
  assert "my_lenet" in nets_factory.networks_map
  assert evaluate.main(common + ["--checkpoint_path", str(tmp_path / "train")]) == 0
  out = capsys.readouterr().out
  assert slim_example_util.accuracy_line(out) > 0.3, out
  assert "MyLeNet/conv1/weights" in [
      name for name, _ in tf.train.list_variables(str(tmp_path / "train"))]


def test_example_errors(tmp_path):
  train = slim_example_util.load("train_image_classifier")
  with pytest.raises(SystemExit, match="no file"):
    train.main(["--nets_module", str(tmp_path / "missing.py")])
  with pytest.raises(ValueError, match="Name of network unknown"):
    train.main(["--dataset_dir", str(tmp_path / "digits"), "--train_dir", str(tmp_path / "t"),
                "--model_name", "alexnet"])
  evaluate = slim_example_util.load("eval_image_classifier")
  with pytest.raises(SystemExit, match="no checkpoint"):
    evaluate.main(["--dataset_dir", str(tmp_path / "digits"),
                   "--checkpoint_path", str(tmp_path)])
