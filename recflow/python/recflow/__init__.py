"""recflow: a dataflow framework for recommendation models, from Python.

  import recflow.compat.v1 as tf     # TensorFlow 1.x's graph-mode API

The C++ core (graphs, sessions, kernels) is the extension module
recflow._pywrap; see docs/python.md.
"""

__version__ = "0.1.0"

from recflow.framework import errors as _errors  # installs the error classes  # noqa: E402,F401
