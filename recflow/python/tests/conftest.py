"""Shared fixtures: a fresh default graph per test, the ZeroOut library's path."""

import os

import pytest

import recflow
import recflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
  tf.reset_default_graph()
  yield
  tf.reset_default_graph()


def build_dir():
  if os.environ.get("RECFLOW_BUILD_DIR"):
    return os.environ["RECFLOW_BUILD_DIR"]
  # build/python/recflow/__init__.py -> build/
  return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(recflow.__file__))))


@pytest.fixture
def zero_out_path():
  path = os.path.join(build_dir(), "lib", "zero_out.so")
  if not os.path.exists(path):
    pytest.fail("%s is missing: build the zero_out target" % path)
  return path
