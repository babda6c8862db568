"""TensorFlow's exception classes (tf.errors), raised for recflow's statuses.

A recflow error (an absl::Status) reaches Python as the OpError subclass of
its code, with recflow's message. When the message names a node of the graph
being run ("node 'dense/MatMul' (MatMul): ..."), Session.run also sets the
exception's `op` and `node_def`.
"""

import re

from recflow import _pywrap

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
  """A generic error raised while running a graph: the base of tf.errors."""

  def __init__(self, node_def, op, message, error_code):
    super(OpError, self).__init__()
    self._node_def = node_def
    self._op = op
    self._message = message
    self._error_code = error_code

  def __reduce__(self):
    init_argspec = (self._node_def, self._op, self._message)
    if type(self) is OpError:  # pylint: disable=unidiomatic-typecheck
      init_argspec += (self._error_code,)
    return type(self), init_argspec

  @property
  def message(self):
    return self._message

  @property
  def op(self):
    """The Operation that failed, when the message names one of the graph."""
    return self._op

  @property
  def error_code(self):
    return self._error_code

  @property
  def node_def(self):
    """The failed node's NodeDef (serialized bytes), or None."""
    return self._node_def

  def __str__(self):
    if self._op is not None:
      return "%s\n\n[[node %s]]" % (self._message, self._op.name)
    return self._message


def _subclass(name, code, doc):
  def __init__(self, node_def, op, message, *args):  # pylint: disable=invalid-name
    OpError.__init__(self, node_def, op, message, code)
  return type(name, (OpError,), {"__init__": __init__, "__doc__": doc})


CancelledError = _subclass("CancelledError", CANCELLED, "An operation was cancelled.")
UnknownError = _subclass("UnknownError", UNKNOWN, "Unknown error.")
InvalidArgumentError = _subclass("InvalidArgumentError", INVALID_ARGUMENT,
                                 "An operation received an invalid argument.")
DeadlineExceededError = _subclass("DeadlineExceededError", DEADLINE_EXCEEDED,
                                  "A deadline expired before the operation could complete.")
NotFoundError = _subclass("NotFoundError", NOT_FOUND,
                          "A requested entity (a file, a node) was not found.")
AlreadyExistsError = _subclass("AlreadyExistsError", ALREADY_EXISTS,
                               "An entity that we attempted to create already exists.")
PermissionDeniedError = _subclass("PermissionDeniedError", PERMISSION_DENIED,
                                  "The caller does not have permission to run an operation.")
ResourceExhaustedError = _subclass("ResourceExhaustedError", RESOURCE_EXHAUSTED,
                                   "Some resource (memory, a queue bound) has been exhausted.")
FailedPreconditionError = _subclass("FailedPreconditionError", FAILED_PRECONDITION,
                                    "The system is not in a state to run an operation (e.g. "
                                    "an uninitialized variable).")
AbortedError = _subclass("AbortedError", ABORTED, "The operation was aborted.")
OutOfRangeError = _subclass("OutOfRangeError", OUT_OF_RANGE,
                            "An operation iterated past the valid input range (the end of "
                            "a dataset).")
UnimplementedError = _subclass("UnimplementedError", UNIMPLEMENTED,
                               "The operation has not been implemented.")
InternalError = _subclass("InternalError", INTERNAL, "The system hit an internal error.")
UnavailableError = _subclass("UnavailableError", UNAVAILABLE,
                             "The runtime is currently unavailable.")
DataLossError = _subclass("DataLossError", DATA_LOSS, "Unrecoverable data loss or corruption.")
UnauthenticatedError = _subclass("UnauthenticatedError", UNAUTHENTICATED,
                                 "The request does not have valid authentication credentials.")

_CODE_TO_EXCEPTION_CLASS = {
    CANCELLED: CancelledError, UNKNOWN: UnknownError, INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError, NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError, PERMISSION_DENIED: PermissionDeniedError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError, FAILED_PRECONDITION: FailedPreconditionError,
    ABORTED: AbortedError, OUT_OF_RANGE: OutOfRangeError, UNIMPLEMENTED: UnimplementedError,
    INTERNAL: InternalError, UNAVAILABLE: UnavailableError, DATA_LOSS: DataLossError,
    UNAUTHENTICATED: UnauthenticatedError,
}


def exception_type_from_error_code(error_code):
  return _CODE_TO_EXCEPTION_CLASS[error_code]


def error_code_from_exception_type(cls):
  for code, c in _CODE_TO_EXCEPTION_CLASS.items():
    if c is cls:
      return code
  raise KeyError(cls)


def _make_error(code, message):
  """The factory the C++ module calls for a non-OK status."""
  cls = _CODE_TO_EXCEPTION_CLASS.get(code, UnknownError)
  return cls(None, None, message)


_NODE_RE = re.compile(r"node '([^']+)'")


def attach_op(error, graph):
  """Sets error.op to the first node of `graph` the message names, if any."""
  if error.op is not None or graph is None:
    return error
  for name in _NODE_RE.findall(error.message):
    op = graph._get_operation_by_name_or_none(name)  # pylint: disable=protected-access
    if op is not None:
      error._op = op  # pylint: disable=protected-access
      error._node_def = op.node_def  # pylint: disable=protected-access
      break
  return error


class raise_exception_on_not_ok_status(object):  # pylint: disable=invalid-name
  """TF 1.x's context manager; recflow raises directly, so it does nothing."""

  def __enter__(self):
    return None

  def __exit__(self, *args):
    return False


_pywrap.set_error_factory(_make_error)
