"""Python functions generated from the op registry (TensorFlow's gen_*_ops).

For every registered op, `make_wrapper` builds a function named in snake_case
(MatMul -> mat_mul, L2Loss -> l2_loss, _FusedMatMul -> _fused_mat_mul) whose
parameters are the op's inputs, then the attrs that the inputs do not
determine (required ones first, then those with defaults), then `name`; its
docstring comes from the OpDef. `raw_op` builds TensorFlow's tf.raw_ops form
(keyword arguments only, CamelCase name).

recflow.ops.gen_ops holds the wrappers of every op registered when it is
imported; `load_op_library` adds a custom-op library's ops to it and to
tf.raw_ops, and returns a module with just that library's wrappers.
"""

import keyword
import os
import threading
import types

from recflow import _pywrap
from recflow.framework import dtypes
from recflow.framework import op_def_library
from recflow.framework import tensor_shape


def snake_case(op_name):
  """TensorFlow's generated-wrapper name of an op (GenerateLowerCaseOpName)."""
  out = []
  last = len(op_name) - 1
  for i, c in enumerate(op_name):
    if c.isupper() and i > 0:
      prev = op_name[i - 1]
      if (prev.islower() or (i < last and op_name[i + 1].islower())) and prev != "_":
        out.append("_")
    out.append(c.lower())
  return "".join(out)


def wrapper_name(op_name):
  """The name of an op's generated function: snake_case, with a trailing "_"
  when that is a Python keyword (If -> if_, While -> while_)."""
  fname = snake_case(op_name)
  return fname + "_" if keyword.iskeyword(fname) else fname


_RESERVED = set(keyword.kwlist) | {"name", "print"}


def _py_param(name):
  return name + "_" if name in _RESERVED else name


class _DefaultType(object):
  """The default of an attr whose value does not print as Python."""

  def __repr__(self):
    return "<default>"


_DEFAULT = _DefaultType()


def _literal(value):
  """Python source for an attr default, or None when it has none."""
  if isinstance(value, (bool, int, float)) or value is None:
    if isinstance(value, float) and value != value:  # NaN
      return None
    return repr(value)
  if isinstance(value, bytes):
    try:
      return repr(value.decode("ascii"))
    except UnicodeDecodeError:
      return None
  if isinstance(value, str):
    return repr(value)
  if isinstance(value, dtypes.DType):
    return "_dtypes.%s" % value.name
  if isinstance(value, (list, tuple)):
    parts = [_literal(v) for v in value]
    return None if any(p is None for p in parts) else "[%s]" % ", ".join(parts)
  return None


def _inferred_attrs(op_def):
  inferred = set()
  for arg in op_def.input_arg:
    for a in (arg.type_attr, arg.number_attr, arg.type_list_attr):
      if a:
        inferred.add(a)
  return inferred


def _type_doc(attr_def):
  if attr_def is None or not attr_def.allowed_values:
    return ""
  return " Must be one of the following types: %s." % ", ".join(
      "`%s`" % t.name for t in attr_def.allowed_values)


def _docstring(op_def):
  lines = [op_def.summary or op_def.name]
  if op_def.description:
    lines += ["", op_def.description]
  lines += ["", "Args:"]
  first_with_attr = {}
  for arg in op_def.input_arg:
    if arg.type != 0:
      kind = "A `Tensor` of type `%s`." % dtypes.as_dtype(arg.type).name
    elif arg.type_attr and arg.type_attr in first_with_attr:
      kind = "A `Tensor`. Must have the same type as `%s`." % first_with_attr[arg.type_attr]
    else:
      kind = "A `Tensor`." + _type_doc(op_def.attr_by_name.get(arg.type_attr))
      if arg.type_attr:
        first_with_attr[arg.type_attr] = arg.name
    if arg.is_list:
      kind = "A list of `Tensor` objects." if arg.type_list_attr else (
          "A list of at least %s `Tensor` objects with the same type." %
          _min_len(op_def, arg.number_attr))
    if arg.is_ref:
      kind = "A mutable " + kind[2:]
    lines.append("  %s: %s%s" % (_py_param(arg.name), kind,
                                 (" " + arg.description) if arg.description else ""))
  inferred = _inferred_attrs(op_def)
  for attr in op_def.attr:
    if attr.name in inferred:
      continue
    if attr.has_default:
      lines.append("  %s: An optional `%s`. Defaults to `%s`.%s" % (
          _py_param(attr.name), attr.type, _describe_default(attr.default_value),
          (" " + attr.description) if attr.description else ""))
    else:
      lines.append("  %s: A `%s`.%s" % (_py_param(attr.name), attr.type,
                                         (" " + attr.description) if attr.description else ""))
  lines.append("  name: A name for the operation (optional).")
  lines += ["", "Returns:"]
  if not op_def.output_arg:
    lines.append("  The created Operation.")
  elif len(op_def.output_arg) == 1:
    arg = op_def.output_arg[0]
    lines.append("  %s%s" % ("A list of `Tensor` objects." if arg.is_list else "A `Tensor`.",
                             (" " + arg.description) if arg.description else ""))
  else:
    lines.append("  A tuple of `Tensor` objects (%s)." %
                 ", ".join(a.name for a in op_def.output_arg))
  return "\n".join(lines)


def _min_len(op_def, number_attr):
  attr = op_def.attr_by_name.get(number_attr)
  return attr.minimum if attr is not None and attr.has_minimum else 0


def _describe_default(value):
  if isinstance(value, dtypes.DType):
    return value.name
  if isinstance(value, tensor_shape.TensorShape):
    return str(value)
  if isinstance(value, bytes):
    return value.decode("utf-8", "replace")
  return repr(value)


def make_wrapper(op_def):
  """The generated function for `op_def` (see the module doc)."""
  fname = wrapper_name(op_def.name)
  inferred = _inferred_attrs(op_def)
  params, pass_through = [], []
  for arg in op_def.input_arg:
    p = _py_param(arg.name)
    params.append(p)
    pass_through.append("%r: %s" % (arg.name, p))
  required = [a for a in op_def.attr if a.name not in inferred and not a.has_default]
  optional = [a for a in op_def.attr if a.name not in inferred and a.has_default]
  for a in required:
    p = _py_param(a.name)
    params.append(p)
    pass_through.append("%r: %s" % (a.name, p))
  for a in optional:
    p = _py_param(a.name)
    literal = _literal(a.default_value)
    params.append("%s=%s" % (p, literal if literal is not None else "_DEFAULT"))
    pass_through.append("%r: %s" % (a.name, p))
  params.append("name=None")
  source = (
      "def {fname}({params}):\n"
      "  kwargs = {{{args}}}\n"
      "  for k in [k for k, v in kwargs.items() if v is _DEFAULT]:\n"
      "    del kwargs[k]\n"
      "  return _apply_op({op!r}, name=name, **kwargs)\n").format(
          fname=fname if fname.isidentifier() else "wrapper", params=", ".join(params),
          args=", ".join(pass_through), op=op_def.name)
  namespace = {"_apply_op": op_def_library.apply_op, "_DEFAULT": _DEFAULT,
               "_dtypes": dtypes}
  exec(source, namespace)  # pylint: disable=exec-used
  fn = namespace[fname if fname.isidentifier() else "wrapper"]
  fn.__doc__ = _docstring(op_def)
  fn.__name__ = fname
  fn.__qualname__ = fname
  fn.__module__ = "recflow.ops.gen_ops"
  fn._op_def = op_def  # pylint: disable=protected-access
  return fn


def raw_op(op_def):
  """TensorFlow's tf.raw_ops.<Op>: keyword arguments only."""
  op_name = op_def.name

  def fn(*args, **kwargs):
    if args:
      raise TypeError("raw_ops.%s takes keyword arguments only (got %d positional)" %
                      (op_name, len(args)))
    name = kwargs.pop("name", None)
    return op_def_library.apply_op(op_name, name=name, **kwargs)

  fn.__name__ = op_name
  fn.__qualname__ = op_name
  fn.__doc__ = _docstring(op_def)
  fn._op_def = op_def  # pylint: disable=protected-access
  return fn


class _RawOps(types.ModuleType):
  """tf.raw_ops: every registered op by its CamelCase name."""

  def __dir__(self):
    return sorted(k for k in self.__dict__ if not k.startswith("__"))


raw_ops = _RawOps("recflow.raw_ops", "Every registered op, keyword arguments only.")
_install_lock = threading.Lock()


def install(op_defs, module):
  """Adds wrappers for `op_defs` to `module`, recflow.ops.gen_ops and raw_ops."""
  from recflow.ops import gen_ops  # pylint: disable=g-import-not-at-top
  with _install_lock:
    for op_def in op_defs:
      fn = make_wrapper(op_def)
      setattr(module, fn.__name__, fn)
      if module is not gen_ops:
        setattr(gen_ops, fn.__name__, fn)
      setattr(raw_ops, op_def.name, raw_op(op_def))


_libraries = {}


def load_op_library(library_filename):
  """Loads a custom-op library (TensorFlow's tf.load_op_library).

  Returns a module holding a Python function for each op the library
  registered (snake_case names); the ops are in tf.raw_ops too, and their
  C++ kernels (and C++ gradients, if the library registers any) are used by
  every Session. Loading a library twice returns the same module.
  """
  path = os.path.realpath(library_filename)
  with _install_lock:
    module = _libraries.get(path)
  if module is not None:
    return module
  op_defs = op_def_library.register_op_defs(_pywrap.load_op_library(library_filename))
  module = types.ModuleType(os.path.splitext(os.path.basename(path))[0],
                            "Ops of the custom-op library %s" % path)
  module.OP_LIST = op_defs
  install(op_defs, module)
  with _install_lock:
    _libraries.setdefault(path, module)
    return _libraries[path]
