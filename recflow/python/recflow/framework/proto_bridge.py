"""recflow's protobuf messages from Python, without Python protobuf.

The extension module converts between the wire format and protobuf JSON (or
text format) with the C++ classes generated from recflow/proto/*.proto, so
Python builds and reads messages as plain dicts (JSON field names as in the
.proto: `graph_def`, `signature_def`; int64 values come back as strings, bytes
as base64, as protobuf's JSON mapping says). Unknown types and malformed input
raise ValueError naming the type."""

import json

from recflow import _pywrap


def encode(type_name, value):
  """Serialized bytes of the message `type_name` (e.g. "tensorflow.SaverDef")
  given as a dict (or a JSON string)."""
  if not isinstance(value, str):
    value = json.dumps(value)
  return _pywrap.proto_from_json(type_name, value)


def decode(type_name, data, enums_as_ints=False, include_defaults=False):
  """The message `type_name` serialized in `data`, as a dict."""
  return json.loads(_pywrap.proto_to_json(type_name, bytes(data), enums_as_ints,
                                          include_defaults))


def from_text(type_name, text):
  """Serialized bytes of a message given in protobuf text format."""
  return _pywrap.proto_from_text(type_name, text)


def to_text(type_name, data):
  """Protobuf text format of a serialized message."""
  return _pywrap.proto_to_text(type_name, bytes(data))
