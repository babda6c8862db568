"""What the model server's REST and gRPC clients share: the model spec, the
conversion of examples (dicts of feature values) to tensorflow.Example JSON,
and the error classes."""

import base64
import numbers

import numpy as np


class ServingError(Exception):
  """The model server refused a request. `message` is the server's own text
  (REST: the body's "error"; gRPC: the status details); `code` is the HTTP
  status (REST) or the gRPC status name (gRPC)."""

  def __init__(self, message, code=None):
    super(ServingError, self).__init__(message if code is None else
                                       "%s: %s" % (code, message))
    self.message = message
    self.code = code


class ServingUnavailableError(ServingError, ConnectionError):
  """The model server could not be reached (not running, wrong host or port)."""


def check_spec(model, version, label):
  if not model or not isinstance(model, str):
    raise ValueError("model must be a non-empty model name, got %r" % (model,))
  if version is not None and label is not None:
    raise ValueError("give a version or a label, not both")
  if version is not None:
    if isinstance(version, bool) or not isinstance(version, numbers.Integral) or version < 0:
      raise ValueError("version must be a non-negative integer, got %r" % (version,))
  if label is not None and (not isinstance(label, str) or not label):
    raise ValueError("label must be a non-empty string, got %r" % (label,))


def model_spec_dict(model, version, label, signature_name=None):
  """A tensorflow.serving.ModelSpec as protobuf JSON."""
  spec = {"name": model}
  if version is not None:
    spec["version"] = str(int(version))  # Int64Value: a plain value in JSON
  if label is not None:
    spec["version_label"] = label
  if signature_name:
    spec["signature_name"] = signature_name
  return spec


def _feature(name, value):
  values = np.asarray(value).reshape(-1) if not isinstance(value, (bytes, str)) else [value]
  values = list(values)
  if not values:
    return {"float_list": {}}
  first = values[0]
  if isinstance(first, (bytes, str, np.bytes_, np.str_)):
    return {"bytes_list": {"value": [
        base64.b64encode(v.encode() if isinstance(v, str) else bytes(v)).decode("ascii")
        for v in values]}}
  if isinstance(first, (bool, np.bool_)) or np.issubdtype(type(first), np.integer):
    return {"int64_list": {"value": [str(int(v)) for v in values]}}
  if np.issubdtype(type(first), np.floating) or isinstance(first, float):
    return {"float_list": {"value": [float(v) for v in values]}}
  raise TypeError("feature %r: values must be numbers, bytes or str, got %s" %
                  (name, type(first).__name__))


def example_dict(features):
  """A tensorflow.Example (protobuf JSON) from {name: value or list}."""
  if not isinstance(features, dict):
    raise TypeError("an example is a dict of feature name -> values, got %s" %
                    type(features).__name__)
  return {"features": {"feature": {k: _feature(k, v) for k, v in features.items()}}}


def input_dict(examples, context=None):
  """A tensorflow.serving.Input (protobuf JSON)."""
  if isinstance(examples, dict) or not isinstance(examples, (list, tuple)):
    raise TypeError("examples must be a list of dicts (feature name -> values)")
  exs = [example_dict(e) for e in examples]
  if context is None:
    return {"example_list": {"examples": exs}}
  return {"example_list_with_context": {"examples": exs, "context": example_dict(context)}}
