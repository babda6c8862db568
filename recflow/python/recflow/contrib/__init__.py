"""tf.contrib on recflow: the parts TF-slim needs (`recflow.contrib.slim`,
`recflow.contrib.framework`, `recflow.contrib.layers`).

Import them by name (`import recflow.contrib.slim as slim`) or reach them as
`tf.contrib.slim` from `recflow.compat.v1`; they load on first use.
"""

import importlib as _importlib

_SUBMODULES = ("framework", "layers", "slim")


def __getattr__(name):
  if name in _SUBMODULES:
    return _importlib.import_module("recflow.contrib." + name)
  raise AttributeError("module 'recflow.contrib' has no attribute %r (recflow's contrib has %s)"
                       % (name, ", ".join(_SUBMODULES)))
