"""OpDefs in Python and apply_op: keyword arguments -> a node of the graph.

This is TensorFlow's op_def_library: given an op's OpDef (from recflow's C++
registry) and the arguments of a call, it converts inputs to Tensors (Python
values become constants of the dtype the op needs), infers type and number
attrs (T, N, ...) from them, checks and converts attrs, adds the node and
returns its outputs shaped as TensorFlow's generated wrappers return them:
the Operation for an op without outputs, a Tensor, a list for a list output,
a namedtuple for several outputs.
"""

import collections
import threading

from recflow import _pywrap
from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import tensor_shape


class _Obj(object):

  def __repr__(self):
    return "%s(%s)" % (type(self).__name__, ", ".join(
        "%s=%r" % kv for kv in sorted(self.__dict__.items())))


class ArgDef(_Obj):
  """An input or output argument of an op (OpDef.ArgDef's fields)."""

  def __init__(self, d):
    self.name = d["name"]
    self.description = d["description"]
    self.type = d["type"]
    self.type_attr = d["type_attr"]
    self.number_attr = d["number_attr"]
    self.type_list_attr = d["type_list_attr"]
    self.is_ref = d["is_ref"]

  @property
  def is_list(self):
    return bool(self.number_attr or self.type_list_attr)


class AttrDef(_Obj):
  """An attr of an op (OpDef.AttrDef's fields); values in Python spellings."""

  def __init__(self, d):
    self.name = d["name"]
    self.type = d["type"]
    self.description = d["description"]
    self.has_default = d["default_value"] is not None
    self.default_value = (ops.attr_value_to_python(*d["default_value"])
                          if self.has_default else None)
    self.has_minimum = d["has_minimum"]
    self.minimum = d["minimum"]
    allowed = d["allowed_values"]
    self.allowed_values = ops.attr_value_to_python(*allowed) if allowed is not None else None


class OpDef(_Obj):
  """An op's definition: inputs, outputs, attrs, docs."""

  def __init__(self, d):
    self.name = d["name"]
    self.summary = d["summary"]
    self.description = d["description"]
    self.is_stateful = d["is_stateful"]
    self.is_commutative = d["is_commutative"]
    self.is_aggregate = d["is_aggregate"]
    self.allows_uninitialized_input = d["allows_uninitialized_input"]
    self.input_arg = [ArgDef(a) for a in d["input_arg"]]
    self.output_arg = [ArgDef(a) for a in d["output_arg"]]
    self.attr = [AttrDef(a) for a in d["attr"]]
    self.attr_by_name = {a.name: a for a in self.attr}

  def __repr__(self):
    return "OpDef(%s)" % self.name


_op_defs = {}
_op_defs_lock = threading.Lock()
_all_loaded = False


def register_op_defs(op_def_dicts):
  """Adds OpDefs (as the C++ module returns them) to the cache; returns them."""
  out = []
  with _op_defs_lock:
    for d in op_def_dicts:
      op_def = OpDef(d)
      _op_defs[op_def.name] = op_def
      out.append(op_def)
  return out


def get_op_def(name):
  op_def = _op_defs.get(name)
  if op_def is None:
    op_def = register_op_defs([_pywrap.op_def(name)])[0]  # NotFoundError when unknown
  return op_def


def all_op_defs():
  """Every registered op's OpDef, sorted by name."""
  global _all_loaded
  if not _all_loaded:
    register_op_defs(_pywrap.op_defs())
    _all_loaded = True
  with _op_defs_lock:
    return [_op_defs[k] for k in sorted(_op_defs)]


# --- Attr conversion -------------------------------------------------------

def _type_enum(value, attr_def, op_type, param_name=None):
  try:
    dtype = dtypes.as_dtype(value)
  except TypeError:
    raise TypeError("Expected DataType for argument '%s' not %r." % (attr_def.name, value))
  _check_allowed_type(dtype, attr_def, param_name or attr_def.name)
  return dtype.base_dtype.as_datatype_enum if not dtype.is_ref_dtype else dtype.as_datatype_enum


def _check_allowed_type(dtype, attr_def, param_name):
  allowed = attr_def.allowed_values
  if allowed and dtype.base_dtype not in allowed:
    raise TypeError("Value passed to parameter '%s' has DataType %s not in list of allowed "
                    "values: %s" % (param_name, dtype.base_dtype.name,
                                    ", ".join(a.name for a in allowed)))


def _make_int(value, attr_name, op_type):
  if isinstance(value, (str, bytes, bool)) or value is None:
    raise TypeError("Expected int for argument '%s' of '%s' Op, not %r." %
                    (attr_name, op_type, value))
  if isinstance(value, tensor_shape.Dimension):
    value = value.value
  try:
    as_int = int(value)
  except (TypeError, ValueError):
    raise TypeError("Expected int for argument '%s' of '%s' Op, not %r." %
                    (attr_name, op_type, value))
  if as_int != value:
    raise TypeError("Expected int for argument '%s' of '%s' Op, not %r." %
                    (attr_name, op_type, value))
  return as_int


def _make_float(value, attr_name, op_type):
  if isinstance(value, (str, bytes, bool)) or value is None:
    raise TypeError("Expected float for argument '%s' of '%s' Op, not %r." %
                    (attr_name, op_type, value))
  try:
    return float(value)
  except (TypeError, ValueError):
    raise TypeError("Expected float for argument '%s' of '%s' Op, not %r." %
                    (attr_name, op_type, value))


def _make_bool(value, attr_name, op_type):
  if not isinstance(value, bool) and type(value).__name__ != "bool_":
    raise TypeError("Expected bool for argument '%s' of '%s' Op, not %r." %
                    (attr_name, op_type, value))
  return bool(value)


def _make_str(value, attr_def, op_type):
  if isinstance(value, bytes):
    value = value.decode("utf-8", "surrogateescape")
  if not isinstance(value, str):
    raise TypeError("Expected string for argument '%s' of '%s' Op, not %r." %
                    (attr_def.name, op_type, value))
  allowed = attr_def.allowed_values
  if allowed:
    allowed = [a.decode() if isinstance(a, bytes) else a for a in allowed]
    if value not in allowed:
      raise ValueError("Attr '%s' of '%s' Op passed string '%s' not in: %s." %
                       (attr_def.name, op_type, value, ", ".join("\"%s\"" % a for a in allowed)))
  return value


def _make_shape(value, attr_name, op_type):
  try:
    return tensor_shape.as_shape(value)._as_dims_or_none()  # pylint: disable=protected-access
  except (TypeError, ValueError) as e:
    raise TypeError("Error converting %r to a TensorShape for argument '%s' of '%s' Op: %s" %
                    (value, attr_name, op_type, e))


def _make_tensor(value, attr_name, op_type):
  if isinstance(value, ops.Tensor):
    raise TypeError("Attr '%s' of '%s' Op takes a constant value, not the Tensor %s" %
                    (attr_name, op_type, value.name))
  return constant_op.to_ndarray(value)


def attr_to_c(attr_def, value, op_type):
  """`value` for attr `attr_def` in the C++ module's spelling, checked."""
  t = attr_def.type
  if t.startswith("list("):
    if not isinstance(value, (list, tuple)):
      raise TypeError("Expected list for attr %s of '%s' Op, not %r." %
                      (attr_def.name, op_type, value))
    if attr_def.has_minimum and len(value) < attr_def.minimum:
      raise ValueError("Attr '%s' of '%s' Op passed list of length %d less than minimum %d."
                       % (attr_def.name, op_type, len(value), attr_def.minimum))
    inner = t[5:-1]
    # A list attr's minimum is its length (checked above), not its values'.
    return [_scalar_attr_to_c(attr_def, inner, v, op_type, in_list=True) for v in value]
  return _scalar_attr_to_c(attr_def, t, value, op_type)


def _scalar_attr_to_c(attr_def, t, value, op_type, in_list=False):
  if t == "type":
    return _type_enum(value, attr_def, op_type)
  if t == "int":
    v = _make_int(value, attr_def.name, op_type)
    if attr_def.has_minimum and not in_list and v < attr_def.minimum:
      raise ValueError("Attr '%s' of '%s' Op passed %d less than minimum %d." %
                       (attr_def.name, op_type, v, attr_def.minimum))
    return v
  if t == "float":
    return _make_float(value, attr_def.name, op_type)
  if t == "bool":
    return _make_bool(value, attr_def.name, op_type)
  if t == "string":
    return _make_str(value, attr_def, op_type)
  if t == "shape":
    return _make_shape(value, attr_def.name, op_type)
  if t == "tensor":
    return _make_tensor(value, attr_def.name, op_type)
  if t == "func":
    return _make_func(value, attr_def, op_type)
  return value


def _make_func(value, attr_def, op_type):
  """A func attr: a function's name, a traced / Defun function (added to
  the default graph's library here), or a serialized NameAttrList."""
  if isinstance(value, str):
    return value
  if isinstance(value, bytes):
    return value  # a serialized NameAttrList
  if hasattr(value, "add_to_graph") and hasattr(value, "name"):
    value.add_to_graph(ops.get_default_graph())
    return value.name
  raise TypeError("Attr '%s' of '%s' Op must be a function name or a function, not %r"
                  % (attr_def.name, op_type, value))


def attrs_to_c(op_def, attrs):
  out = {}
  for key, value in attrs.items():
    attr_def = op_def.attr_by_name.get(key)
    if attr_def is None:
      if key.startswith("_"):
        out[key] = value
        continue
      raise TypeError("Op '%s' has no attr named '%s'" % (op_def.name, key))
    out[key] = attr_to_c(attr_def, value, op_def.name)
  return out


def group_flat_inputs(op_def, inputs, attrs):
  """Splits a flat input list by the op's input arguments (for Graph.create_op)."""
  args = []
  lists = [a for a in op_def.input_arg if a.is_list]
  fixed = len(op_def.input_arg) - len(lists)
  pos = 0
  for arg in op_def.input_arg:
    if not arg.is_list:
      args.append(inputs[pos])
      pos += 1
      continue
    if arg.number_attr and arg.number_attr in attrs:
      n = int(attrs[arg.number_attr])
    elif arg.type_list_attr and arg.type_list_attr in attrs:
      n = len(attrs[arg.type_list_attr])
    elif len(lists) == 1:
      n = len(inputs) - fixed
    else:
      raise ValueError("create_op('%s'): cannot split %d flat inputs among its list arguments; "
                       "give the number attrs" % (op_def.name, len(inputs)))
    args.append(list(inputs[pos:pos + n]))
    pos += n
  if pos != len(inputs):
    raise ValueError("create_op('%s'): given %d inputs, the op takes %d" %
                     (op_def.name, len(inputs), pos))
  return args


# --- apply_op --------------------------------------------------------------

def _flatten_values(values):
  for v in values:
    if isinstance(v, (list, tuple)):
      for x in v:
        yield x
    else:
      yield v


_namedtuples = {}


def _output_type(op_def):
  t = _namedtuples.get(op_def.name)
  if t is None:
    t = collections.namedtuple(op_def.name, [a.name for a in op_def.output_arg],
                               rename=True)
    _namedtuples[op_def.name] = t
  return t


def apply_op(op_type_name, name=None, **keywords):
  """Adds a node of `op_type_name` from keyword arguments; see the module doc."""
  op_def = get_op_def(op_type_name)
  g = ops._get_graph_from_inputs(list(_flatten_values(keywords.values())))  # pylint: disable=protected-access
  if name is None:
    name = op_type_name
  with g.as_default(), ops.name_scope(name) as scope:
    attrs = {}           # attr name -> DType / int / ... (Python spellings)
    inferred_from = {}
    input_args = []
    for input_arg in op_def.input_arg:
      input_name = input_arg.name
      if input_name in keywords:
        values = keywords.pop(input_name)
      elif input_name + "_" in keywords:
        values = keywords.pop(input_name + "_")
      else:
        raise TypeError("No argument for input %s of '%s' Op" % (input_name, op_type_name))
      values = _convert_input(op_def, input_arg, values, attrs, inferred_from, keywords)
      input_args.append(values)
    c_attrs = {}
    for attr_def in op_def.attr:
      key = attr_def.name
      value_given = key in keywords or key + "_" in keywords
      if key in attrs:
        if value_given:
          given = keywords.pop(key) if key in keywords else keywords.pop(key + "_")
          if attr_def.type == "type" and dtypes.as_dtype(given).base_dtype != attrs[key]:
            raise TypeError("Should not specify value for inferred attr '%s' of '%s' Op (given "
                            "%s, inferred %s from '%s')." % (key, op_type_name, given,
                                                              attrs[key], inferred_from[key]))
        value = attrs[key]
        c_attrs[key] = (value.as_datatype_enum if isinstance(value, dtypes.DType) else
                        [v.as_datatype_enum for v in value] if attr_def.type == "list(type)"
                        else value)
        continue
      if value_given:
        value = keywords.pop(key) if key in keywords else keywords.pop(key + "_")
      elif attr_def.has_default:
        continue  # C++ fills in the default
      else:
        raise TypeError("No argument for attr %s of '%s' Op" % (key, op_type_name))
      c_attrs[key] = attr_to_c(attr_def, value, op_type_name)
    for key in list(keywords):
      if key.startswith("_"):
        c_attrs[key] = keywords.pop(key)
    if keywords:
      raise TypeError("%s got unexpected keyword arguments: %s" %
                      (op_type_name, ", ".join(sorted(keywords))))
    op = g._create_op_internal(op_type_name, input_args, c_attrs, scope)  # pylint: disable=protected-access
  return _restructure_outputs(op_def, op, attrs)


def _convert_input(op_def, input_arg, values, attrs, inferred_from, keywords):
  op_type_name = op_def.name
  input_name = input_arg.name
  if input_arg.is_list:
    if not isinstance(values, (list, tuple)):
      raise TypeError("Expected list for '%s' argument to '%s' Op, not %r." %
                      (input_name, op_type_name, values))
    dtype = None
    default_dtype = None
    if input_arg.type != 0:
      dtype = input_arg.type
    elif input_arg.number_attr:
      if input_arg.type_attr in attrs:
        dtype = attrs[input_arg.type_attr]
      else:
        for t in values:
          if isinstance(t, ops.Tensor):
            dtype = t.dtype.base_dtype
            break
      if dtype is None:
        default_dtype = _default_type(op_def, input_arg.type_attr, keywords)
    try:
      values = ops.internal_convert_n_to_tensor(values, name=input_name, dtype=dtype,
                                                as_ref=input_arg.is_ref,
                                                preferred_dtype=default_dtype)
    except (TypeError, ValueError) as e:
      raise TypeError("Tensors in list passed to '%s' of '%s' Op could not be converted to "
                      "one type: %s" % (input_name, op_type_name, e))
    types = [v.dtype for v in values]
  else:
    dtype = None
    default_dtype = None
    if input_arg.type != 0:
      dtype = input_arg.type
    elif input_arg.type_attr in attrs:
      dtype = attrs[input_arg.type_attr]
    elif input_arg.type_attr:
      given = keywords.get(input_arg.type_attr)
      if given is not None:
        dtype = dtypes.as_dtype(given)
      else:
        default_dtype = _default_type(op_def, input_arg.type_attr, keywords)
    try:
      values = ops.internal_convert_to_tensor(values, name=input_name, dtype=dtype,
                                              as_ref=input_arg.is_ref,
                                              preferred_dtype=default_dtype)
    except TypeError as err:
      if dtype is None:
        raise
      raise TypeError("Expected %s passed to parameter '%s' of op '%s', got %s of type '%s' "
                      "instead. Error: %s" % (dtypes.as_dtype(dtype).name, input_name,
                                              op_type_name, _short(values),
                                              type(values).__name__, err))
    except ValueError:
      try:
        observed = ops.internal_convert_to_tensor(values, as_ref=input_arg.is_ref).dtype.name
      except (TypeError, ValueError) as err:
        raise ValueError("Tried to convert '%s' to a tensor and failed. Error: %s" %
                         (input_name, err))
      prefix = ("Input '%s' of '%s' Op has type %s that does not match" %
                (input_name, op_type_name, observed))
      if input_arg.type_attr in attrs:
        raise TypeError("%s type %s of argument '%s'." %
                        (prefix, attrs[input_arg.type_attr].name,
                         inferred_from[input_arg.type_attr]))
      raise TypeError("%s expected type of %s." % (prefix, dtypes.as_dtype(dtype).name))
    types = [values.dtype]
  base_types = [t.base_dtype for t in types]
  if input_arg.is_ref and not all(t.is_ref_dtype for t in types):
    raise TypeError("'%s' Op requires that input '%s' be a mutable tensor (e.g.: a "
                    "tf.Variable)" % (op_type_name, input_name))
  if input_arg.number_attr:
    n_attr = input_arg.number_attr
    if n_attr in attrs:
      if len(values) != attrs[n_attr]:
        raise ValueError("List argument '%s' to '%s' Op with length %d must match length %d "
                         "of argument '%s'." % (input_name, op_type_name, len(values),
                                                attrs[n_attr], inferred_from[n_attr]))
    else:
      attrs[n_attr] = len(values)
      inferred_from[n_attr] = input_name
      attr_def = op_def.attr_by_name.get(n_attr)
      if attr_def is not None and attr_def.has_minimum and len(values) < attr_def.minimum:
        raise ValueError("List argument '%s' to '%s' Op with length %d shorter than minimum "
                         "length %d." % (input_name, op_type_name, len(values),
                                         attr_def.minimum))
    if any(bt != base_types[0] for bt in base_types):
      raise TypeError("All tensors passed to '%s' of '%s' Op must have the same type." %
                      (input_name, op_type_name))
    if input_arg.type != 0:
      if base_types and base_types[0] != input_arg.type:
        raise TypeError("All tensors passed to '%s' of '%s' Op must have type %s." %
                        (input_name, op_type_name, dtypes.as_dtype(input_arg.type).name))
    elif base_types:
      _infer_type_attr(op_def, input_arg.type_attr, base_types[0], input_name, attrs,
                       inferred_from)
  elif input_arg.type_attr:
    _infer_type_attr(op_def, input_arg.type_attr, base_types[0], input_name, attrs,
                     inferred_from)
  elif input_arg.type_list_attr:
    attr_def = op_def.attr_by_name[input_arg.type_list_attr]
    for bt in base_types:
      _check_allowed_type(bt, attr_def, input_arg.type_list_attr)
    attrs[input_arg.type_list_attr] = base_types
    inferred_from[input_arg.type_list_attr] = input_name
  elif base_types[0] != input_arg.type:
    raise TypeError("Input '%s' of '%s' Op has type %s that does not match expected type of "
                    "%s." % (input_name, op_type_name, base_types[0].name,
                             dtypes.as_dtype(input_arg.type).name))
  return values


def _infer_type_attr(op_def, type_attr, dtype, input_name, attrs, inferred_from):
  if type_attr in attrs:
    if attrs[type_attr] != dtype:
      raise TypeError("Input '%s' of '%s' Op has type %s that does not match type %s of "
                      "argument '%s'." % (input_name, op_def.name, dtype.name,
                                          attrs[type_attr].name, inferred_from[type_attr]))
    return
  _check_allowed_type(dtype, op_def.attr_by_name[type_attr], type_attr)
  attrs[type_attr] = dtype
  inferred_from[type_attr] = input_name


def _default_type(op_def, type_attr, keywords):
  attr_def = op_def.attr_by_name.get(type_attr)
  if attr_def is not None and attr_def.has_default:
    return attr_def.default_value
  return None


def _short(v):
  text = repr(v)
  return text if len(text) < 80 else text[:77] + "..."


def _restructure_outputs(op_def, op, attrs):
  outputs = op.outputs
  if not op_def.output_arg:
    return op
  parts = []
  pos = 0
  for arg in op_def.output_arg:
    if arg.number_attr:
      n = attrs.get(arg.number_attr)
      if n is None:
        n = op.get_attr(arg.number_attr)
      parts.append(list(outputs[pos:pos + n]))
      pos += n
    elif arg.type_list_attr:
      types = attrs.get(arg.type_list_attr)
      if types is None:
        types = op.get_attr(arg.type_list_attr)
      parts.append(list(outputs[pos:pos + len(types)]))
      pos += len(types)
    else:
      parts.append(outputs[pos])
      pos += 1
  if len(parts) == 1:
    return parts[0]
  return _output_type(op_def)._make(parts)
