"""examples/python/slim/train_image_classifier.py as a user runs it -- no arguments but
where to write -- trains LeNet on the digits to the issue's bar (test accuracy >= 0.97,
printed last); and the user's net from examples/python/slim/nets/ trains as well without
changing recflow. Minutes on two cores: labelled slow (make test-all)."""

import os
import subprocess
import sys

import pytest

import slim_example_util

pytest.importorskip("sklearn", reason="the digits come from scikit-learn (python3-sklearn)")


def _run(args, tmp_path):
  script = os.path.join(slim_example_util.example_dir(), "train_image_classifier.py")
  proc = subprocess.run([sys.executable, script, "--dataset_dir", str(tmp_path / "digits"),
                         "--train_dir", str(tmp_path / "train")] + args,
                        capture_output=True, text=True, timeout=1800)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  print(proc.stdout)
  return slim_example_util.accuracy_line(proc.stdout)


def test_lenet_defaults_reach_097(tmp_path):
  assert _run([], tmp_path) >= 0.97


def test_users_lenet_reaches_097(tmp_path):
  nets = os.path.join(slim_example_util.example_dir(), "nets", "my_lenet.py")
  assert _run(["--nets_module", nets, "--model_name", "my_lenet"], tmp_path) >= 0.97
