"""A Python function for every op in recflow's registry, generated at import.

The TensorFlow-style names (snake_case, see framework/op_wrappers.py) of
every registered op: `gen_ops.mat_mul(a, b, transpose_a=False)`,
`gen_ops.embedding_bag(...)`. Ops of custom-op libraries loaded later with
tf.load_op_library are added here too.
"""

import sys as _sys

from recflow.framework import op_def_library as _op_def_library
from recflow.framework import op_wrappers as _op_wrappers

_op_wrappers.install(_op_def_library.all_op_defs(), _sys.modules[__name__])
