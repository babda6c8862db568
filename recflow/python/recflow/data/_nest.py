"""recflow.util.nest, imported on first use (so that `import recflow` works
even before anything needs nested structures)."""

import importlib

_module = None


def __getattr__(name):
  global _module
  if _module is None:
    _module = importlib.import_module("recflow.util.nest")
  return getattr(_module, name)
