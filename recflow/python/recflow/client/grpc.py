"""A client of the model server's gRPC API (TF Serving's
tensorflow.serving.PredictionService and ModelService, which `recflow serve
--port` speaks), for tests and notebooks. NumPy in, NumPy out.

  c = Client("127.0.0.1", 8500, "ctr")              # or version=3, label="stable"
  c.predict({"x": x})                               # -> {"prob": ndarray}
  c.classify([{"age": 3.0}, ...]); c.regress([...])
  c.metadata(); c.status(); c.close()

Needs Debian's python3-grpcio (imported when a Client is made). There is no
Python protobuf: requests are built as protobuf JSON and serialized by
recflow's C++ protos (framework/proto_bridge.py), then sent as bytes through
grpc's generic `channel.unary_unary(method)`; arrays cross as TensorProtos
converted by recflow's C++ (tensor_content). A refused call raises
ServingError with the server's message and the gRPC status name; an
unreachable server ServingUnavailableError.
"""

import importlib

from recflow import _pywrap
from recflow.client import serving_util
from recflow.client.serving_util import ServingError, ServingUnavailableError  # noqa: F401
from recflow.framework import proto_bridge

_PREDICTION_SERVICE = "/tensorflow.serving.PredictionService/"
_MODEL_SERVICE = "/tensorflow.serving.ModelService/"


def _import_grpc():
  try:
    return importlib.import_module("grpc")
  except ImportError as e:
    raise ImportError("recflow.client.grpc needs gRPC's Python package: install Debian's "
                      "python3-grpcio (apt-get install python3-grpcio; "
                      "scripts/install-deps.sh does) (%s)" % e) from None


def _tensor_dict(value):
  """A TensorProto (protobuf JSON) of an array, converted by recflow's C++."""
  return proto_bridge.decode("tensorflow.TensorProto", _pywrap.tensor_proto_from_numpy(value, 0))


def _ndarray(tensor_dict):
  return _pywrap.tensor_proto_to_numpy(proto_bridge.encode("tensorflow.TensorProto",
                                                           tensor_dict))


class Client(object):
  """gRPC client for one model (optionally one version or label)."""

  def __init__(self, host, port, model, version=None, label=None, timeout=30.0):
    serving_util.check_spec(model, version, label)
    self._grpc = _import_grpc()
    self._target = "%s:%d" % (host, int(port))
    self._model, self._version, self._label = model, version, label
    self._timeout = timeout
    self._channel = self._grpc.insecure_channel(
        self._target, options=[("grpc.max_receive_message_length", -1)])
    self._calls = {}

  def close(self):
    if self._channel is not None:
      self._channel.close()
      self._channel = None

  def __enter__(self):
    return self

  def __exit__(self, *unused):
    self.close()

  def _spec(self, signature_name=None):
    return serving_util.model_spec_dict(self._model, self._version, self._label,
                                        signature_name)

  def _call(self, method, request_type, request, response_type):
    if self._channel is None:
      raise ValueError("the gRPC client is closed")
    fn = self._calls.get(method)
    if fn is None:
      fn = self._channel.unary_unary(method, request_serializer=None,
                                     response_deserializer=None)
      self._calls[method] = fn
    data = proto_bridge.encode(request_type, request)
    try:
      raw = fn(data, timeout=self._timeout)
    except self._grpc.RpcError as e:
      code = e.code()
      name = getattr(code, "name", str(code))
      if code == self._grpc.StatusCode.UNAVAILABLE:
        raise ServingUnavailableError("cannot reach the model server at %s: %s" %
                                      (self._target, e.details()), name) from None
      raise ServingError(e.details(), name) from None
    return proto_bridge.decode(response_type, raw, enums_as_ints=False)

  def predict(self, inputs, output_filter=None, signature_name=None):
    """PredictionService.Predict: `inputs` a dict of input name -> array (or
    one array for a signature with one input, named by the metadata).
    Returns a dict of output name -> ndarray."""
    if not isinstance(inputs, dict):
      sig = self._signature(signature_name)
      if len(sig.get("inputs", {})) != 1:
        raise ValueError("predict takes a dict of input name -> array; the signature has "
                         "inputs %s" % sorted(sig.get("inputs", {})))
      inputs = {next(iter(sig["inputs"])): inputs}
    request = {"model_spec": self._spec(signature_name),
               "inputs": {k: _tensor_dict(v) for k, v in inputs.items()}}
    if output_filter:
      request["output_filter"] = list(output_filter)
    out = self._call(_PREDICTION_SERVICE + "Predict", "tensorflow.serving.PredictRequest",
                     request, "tensorflow.serving.PredictResponse")
    return {k: _ndarray(v) for k, v in out.get("outputs", {}).items()}

  def classify(self, examples, context=None, signature_name=None):
    """PredictionService.Classify: per example a list of (label, score)."""
    request = {"model_spec": self._spec(signature_name),
               "input": serving_util.input_dict(examples, context)}
    out = self._call(_PREDICTION_SERVICE + "Classify",
                     "tensorflow.serving.ClassificationRequest", request,
                     "tensorflow.serving.ClassificationResponse")
    result = []
    for c in out.get("result", {}).get("classifications", []):
      result.append([(x.get("label", ""), float(x.get("score", 0.0)))
                     for x in c.get("classes", [])])
    return result

  def regress(self, examples, context=None, signature_name=None):
    """PredictionService.Regress: one float per example (a list)."""
    request = {"model_spec": self._spec(signature_name),
               "input": serving_util.input_dict(examples, context)}
    out = self._call(_PREDICTION_SERVICE + "Regress", "tensorflow.serving.RegressionRequest",
                     request, "tensorflow.serving.RegressionResponse")
    return [float(r.get("value", 0.0)) for r in out.get("result", {}).get("regressions", [])]

  def metadata(self, metadata_field=("signature_def",)):
    """PredictionService.GetModelMetadata as protobuf JSON: {"model_spec": ...,
    "metadata": {"signature_def": {"@type": ..., "signature_def": {...}}}}."""
    request = {"model_spec": self._spec(), "metadata_field": list(metadata_field)}
    return self._call(_PREDICTION_SERVICE + "GetModelMetadata",
                      "tensorflow.serving.GetModelMetadataRequest", request,
                      "tensorflow.serving.GetModelMetadataResponse")

  def _signature(self, signature_name):
    sigs = self.metadata()["metadata"]["signature_def"]["signature_def"]
    name = signature_name or "serving_default"
    if name not in sigs:
      raise ServingError("no signature %r; the model has %s" % (name, sorted(sigs)))
    return sigs[name]

  def status(self):
    """ModelService.GetModelStatus as protobuf JSON: {"model_version_status":
    [{"version": "1", "state": "AVAILABLE", "status": {...}}]}."""
    return self._call(_MODEL_SERVICE + "GetModelStatus",
                      "tensorflow.serving.GetModelStatusRequest",
                      {"model_spec": self._spec()},
                      "tensorflow.serving.GetModelStatusResponse")
