"""arg_scope: default keyword arguments for a set of functions (tf.contrib.framework).

    with arg_scope([slim.conv2d, slim.fully_connected], activation_fn=tf.nn.relu,
                   weights_regularizer=slim.l2_regularizer(0.0005)):
      net = slim.conv2d(images, 32, [5, 5])       # relu, regularized
      net = slim.conv2d(net, 64, [5, 5], activation_fn=None)   # an explicit argument wins

Only functions decorated with @add_arg_scope take part. As in TensorFlow, an
argument the function does not take is an error when the function is called
(a TypeError naming it), not when the scope opens. Scopes nest: an inner
scope adds to (and overrides) the arguments of the outer one for the same
function. `with arg_scope(sc):` re-enters a scope captured earlier (`as sc`),
replacing the current one while it is open. The stack is per thread.
"""

import contextlib
import functools
import inspect
import threading

__all__ = ["arg_scope", "add_arg_scope", "current_arg_scope", "has_arg_scope",
           "arg_scoped_arguments", "arg_scope_func_key"]

_DECORATED_OPS = {}
_local = threading.local()


def _stack():
  if not hasattr(_local, "stack"):
    _local.stack = [{}]
  return _local.stack


def current_arg_scope():
  """The innermost scope: {function key: {argument: value}}."""
  return _stack()[-1]


def arg_scope_func_key(op):
  return getattr(op, "_key_op", None) or "%s.%s" % (getattr(op, "__module__", "?"),
                                                    getattr(op, "__qualname__", repr(op)))


def _op_name(op):
  return "%s.%s" % (getattr(op, "__module__", "?"), getattr(op, "__name__", repr(op)))


def _kwarg_names(func):
  try:
    params = inspect.signature(func).parameters.values()
  except (TypeError, ValueError):
    return ()
  return tuple(p.name for p in params
               if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


@contextlib.contextmanager
def arg_scope(list_ops_or_scope, **kwargs):
  """Sets default arguments for the decorated functions in list_ops_or_scope (a list
  or tuple of them), or re-enters a scope dict captured from an earlier arg_scope."""
  stack = _stack()
  if isinstance(list_ops_or_scope, dict):
    if kwargs:
      raise ValueError("When attempting to re-use a scope by suppling a dictionary, kwargs must "
                       "be empty.")
    stack.append(dict(list_ops_or_scope))
    try:
      yield stack[-1]
    finally:
      stack.pop()
    return
  if not isinstance(list_ops_or_scope, (list, tuple)):
    raise TypeError("list_ops_or_scope must either be a list/tuple or reused scope (i.e. dict)")
  current = dict(stack[-1])
  for op in list_ops_or_scope:
    if not has_arg_scope(op):
      raise ValueError("%s is not decorated with @add_arg_scope" % _op_name(op))
    key = arg_scope_func_key(op)
    merged = dict(current.get(key, {}))
    merged.update(kwargs)
    current[key] = merged
  stack.append(current)
  try:
    yield current
  finally:
    stack.pop()


def add_arg_scope(func):
  """Lets arg_scope set func's keyword arguments."""
  key = arg_scope_func_key(func)
  names = _kwarg_names(func)
  has_var_kwargs = False
  try:
    has_var_kwargs = any(p.kind == p.VAR_KEYWORD
                         for p in inspect.signature(func).parameters.values())
  except (TypeError, ValueError):
    has_var_kwargs = True

  @functools.wraps(func)
  def func_with_args(*args, **kwargs):
    scoped = current_arg_scope().get(key)
    if scoped:
      merged = dict(scoped)
      merged.update(kwargs)
      kwargs = merged
    return func(*args, **kwargs)

  _DECORATED_OPS[key] = None if has_var_kwargs else names
  func_with_args._key_op = key  # pylint: disable=protected-access
  return func_with_args


def has_arg_scope(func):
  return arg_scope_func_key(func) in _DECORATED_OPS


def arg_scoped_arguments(func):
  """The argument names arg_scope may set for func."""
  if not has_arg_scope(func):
    raise ValueError("%s is not decorated with @add_arg_scope" % _op_name(func))
  return list(_DECORATED_OPS[arg_scope_func_key(func)] or ())
