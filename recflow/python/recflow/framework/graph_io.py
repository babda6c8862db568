"""GraphDef in Python, import_graph_def and write_graph.

recflow's Python layer does not need Python protobuf: `GraphDef` holds the
serialized bytes of a TensorFlow GraphDef (the wire format recflow's C++
reads and writes) and offers the parts of the protobuf class that TF 1.x
programs use: SerializeToString / ParseFromString / FromString, `node` (a
read-only list of name, op, input, device) and text output.
"""

import collections
import os

from recflow import _pywrap
from recflow.framework import ops

NodeDefSummary = collections.namedtuple("NodeDefSummary", ["name", "op", "input", "device"])


class GraphDef(object):
  """A serialized GraphDef with protobuf-like accessors."""

  def __init__(self, serialized=b""):
    self._serialized = bytes(serialized)
    self._nodes = None

  @classmethod
  def FromString(cls, serialized):  # pylint: disable=invalid-name
    g = cls(serialized)
    _ = g.node  # validates
    return g

  def ParseFromString(self, serialized):  # pylint: disable=invalid-name
    nodes = [NodeDefSummary(*n) for n in _pywrap.graph_def_nodes(bytes(serialized))]
    self._serialized = bytes(serialized)
    self._nodes = nodes
    return len(serialized)

  def MergeFromString(self, serialized):  # pylint: disable=invalid-name
    return self.ParseFromString(self._serialized + bytes(serialized))

  def SerializeToString(self):  # pylint: disable=invalid-name
    return self._serialized

  def ByteSize(self):  # pylint: disable=invalid-name
    return len(self._serialized)

  @property
  def node(self):
    if self._nodes is None:
      self._nodes = [NodeDefSummary(*n) for n in _pywrap.graph_def_nodes(self._serialized)]
    return self._nodes

  def __str__(self):
    return _pywrap.graph_def_to_text(self._serialized)

  def __eq__(self, other):
    return isinstance(other, GraphDef) and self._serialized == other._serialized

  def __ne__(self, other):
    return not self.__eq__(other)

  __hash__ = None


def _as_bytes(graph_def):
  if isinstance(graph_def, GraphDef):
    return graph_def.SerializeToString()
  if isinstance(graph_def, (bytes, bytearray)):
    return bytes(graph_def)
  if hasattr(graph_def, "SerializeToString"):  # a protobuf GraphDef
    return graph_def.SerializeToString()
  raise TypeError("graph_def must be a GraphDef (or its serialized bytes), got %s"
                  % type(graph_def).__name__)


def import_graph_def(graph_def, input_map=None, return_elements=None, name=None,
                     op_dict=None, producer_op_list=None):
  """Imports a GraphDef into the default graph, as tf.import_graph_def does.

  Nodes are named "<name>/<node>" (name defaults to "import"; "" imports the
  names unchanged). `input_map` maps tensor names of graph_def to Tensors of
  this graph. Returns the elements named by `return_elements` ("op" or
  "op:i"), or None.
  """
  serialized = _as_bytes(graph_def)
  input_map = dict(input_map or {})
  for k, v in input_map.items():
    if not isinstance(k, str):
      raise TypeError("input_map keys must be strings, got %r" % (k,))
    if not isinstance(v, ops.Tensor):
      raise TypeError("input_map values must be Tensors, got %r" % (v,))
  graph = ops._get_graph_from_inputs(list(input_map.values()))  # pylint: disable=protected-access
  with graph.as_default():
    if name == "":  # pylint: disable=g-explicit-bool-comparison
      prefix = ""
    else:
      with ops.name_scope(name, "import", list(input_map.values())) as scope:
        prefix = scope[:-1]
    c_map = {k: v._as_tf_output() for k, v in input_map.items()}  # pylint: disable=protected-access
    try:
      node_ids = graph._c_graph.import_graph_def(serialized, prefix, c_map)  # pylint: disable=protected-access
    except ops.errors.OpError as e:
      raise ValueError(e.message)
    graph._sync()  # pylint: disable=protected-access
    imported = {}
    for node_id in node_ids:
      op = graph._op_by_id(node_id)  # pylint: disable=protected-access
      imported[op.name[len(prefix) + 1:] if prefix else op.name] = op
    if return_elements is None:
      return None
    results = []
    for el in return_elements:
      if ":" in el:
        op_name, index = el.split(":")
        if op_name not in imported:
          raise ValueError("Requested return_element %r not found in graph_def." % el)
        results.append(imported[op_name].outputs[int(index)])
      else:
        if el not in imported:
          raise ValueError("Requested return_element %r not found in graph_def." % el)
        results.append(imported[el])
    return results


def write_graph(graph_or_graph_def, logdir, name, as_text=True):
  """Writes a graph (or GraphDef) to logdir/name, as text or binary; returns the path."""
  if isinstance(graph_or_graph_def, ops.Graph):
    serialized = graph_or_graph_def.as_graph_def().SerializeToString()
  else:
    serialized = _as_bytes(graph_or_graph_def)
  os.makedirs(logdir, exist_ok=True)
  path = os.path.join(logdir, name)
  tmp = path + ".tmp%d" % os.getpid()
  if as_text:
    with open(tmp, "w") as f:
      f.write(_pywrap.graph_def_to_text(serialized))
  else:
    with open(tmp, "wb") as f:
      f.write(serialized)
  os.replace(tmp, path)
  return path
