"""Loading examples/python/slim's scripts as modules (shared by the fast and slow tests)."""

import importlib.util
import os
import sys


def source_dir():
  return os.environ.get("RECFLOW_SOURCE_DIR") or os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")


def example_dir():
  return os.path.join(source_dir(), "examples", "python", "slim")


def load(name):
  """examples/python/slim/<name>.py as a module."""
  directory = example_dir()
  if directory not in sys.path:
    sys.path.insert(0, directory)
  spec = importlib.util.spec_from_file_location("slim_" + name,
                                                os.path.join(directory, name + ".py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def accuracy_line(output):
  """The value of the last line, `test accuracy X`."""
  last = output.strip().splitlines()[-1]
  assert last.startswith("test accuracy "), "last line is %r" % last
  return float(last.split()[-1])
