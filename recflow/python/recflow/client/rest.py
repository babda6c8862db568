"""A client of the model server's REST API (TF Serving's, which `recflow
serve --rest_api_port` speaks), for tests and notebooks; standard library
only (urllib).

  c = Client("127.0.0.1", 8501, "ctr")              # or version=3, label="stable"
  c.predict(instances=x)                            # row format -> ndarray(s)
  c.predict(inputs={"x": x})                        # columnar format
  c.classify([{"age": 3.0}, ...]); c.regress([...])
  c.metadata(); c.status()

URLs are TF Serving's: /v1/models/NAME[/versions/N | /labels/L] with
:predict, :classify, :regress (POST), /metadata and the bare path for the
status (GET). NumPy arrays are sent as JSON lists (bytes as {"b64": ...});
predictions come back as ndarrays (a dict of them for several named
outputs). A refused request raises ServingError with the server's message and
the HTTP status; an unreachable server ServingUnavailableError.
"""

import base64
import json
import urllib.error
import urllib.parse
import urllib.request

import numpy as np

from recflow.client import serving_util
from recflow.client.serving_util import ServingError, ServingUnavailableError  # noqa: F401


def _jsonable(value):
  """JSON-ready: arrays as lists, bytes as TF Serving's {"b64": ...}."""
  if isinstance(value, dict):
    return {k: _jsonable(v) for k, v in value.items()}
  if isinstance(value, np.ndarray):
    value = value.tolist()
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if isinstance(value, (bytes, np.bytes_)):
    return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
  if isinstance(value, np.generic):
    return value.item()
  return value


def _decode_b64(value):
  if isinstance(value, dict) and set(value) == {"b64"}:
    return base64.b64decode(value["b64"])
  if isinstance(value, list):
    return [_decode_b64(v) for v in value]
  return value


def _to_array(value):
  return np.asarray(_decode_b64(value))


class Client(object):
  """REST client for one model (optionally one version or label)."""

  def __init__(self, host, port, model, version=None, label=None, timeout=30.0):
    serving_util.check_spec(model, version, label)
    self._base = "http://%s:%d" % (host, int(port))
    path = "/v1/models/" + urllib.parse.quote(model, safe="")
    if version is not None:
      path += "/versions/%d" % int(version)
    elif label is not None:
      path += "/labels/" + urllib.parse.quote(label, safe="")
    self._path = path
    self._timeout = timeout

  @property
  def url(self):
    return self._base + self._path

  def _request(self, suffix, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        self._base + self._path + suffix, data=data, method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json"})
    try:
      with urllib.request.urlopen(req, timeout=self._timeout) as resp:
        text = resp.read().decode()
    except urllib.error.HTTPError as e:
      raw = e.read().decode(errors="replace")
      try:
        message = json.loads(raw)["error"]
      except (ValueError, KeyError, TypeError):
        message = raw or e.reason
      raise ServingError(message, e.code) from None
    except (urllib.error.URLError, OSError) as e:
      reason = getattr(e, "reason", e)
      raise ServingUnavailableError(
          "cannot reach the model server at %s: %s" % (self._base, reason)) from None
    try:
      return json.loads(text)
    except ValueError:
      raise ServingError("the server's answer is not JSON: %r" % text[:200]) from None

  def predict(self, instances=None, inputs=None, signature_name=None):
    """Runs the signature (default serving_default) on `instances` (row
    format: a list or array with one entry per example, or a list of dicts
    of named inputs) or `inputs` (columnar: an array, or a dict of name ->
    array). Returns an ndarray, or a dict of ndarrays for several outputs."""
    if (instances is None) == (inputs is None):
      raise ValueError("give exactly one of instances (row format) and inputs (columnar)")
    body = {}
    if signature_name:
      body["signature_name"] = signature_name
    if instances is not None:
      body["instances"] = _jsonable(instances)
    else:
      body["inputs"] = _jsonable(inputs)
    out = self._request(":predict", body)
    if "predictions" in out:
      preds = out["predictions"]
      if isinstance(preds, list) and preds and isinstance(preds[0], dict):
        return {k: _to_array([row[k] for row in preds]) for k in preds[0]}
      return _to_array(preds)
    if "outputs" in out:
      outputs = out["outputs"]
      if isinstance(outputs, dict):
        return {k: _to_array(v) for k, v in outputs.items()}
      return _to_array(outputs)
    raise ServingError("the server's answer has neither predictions nor outputs: %r" % out)

  def _examples_body(self, examples, context, signature_name):
    if not isinstance(examples, (list, tuple)):
      raise TypeError("examples must be a list of dicts (feature name -> values)")
    body = {"examples": [_jsonable(e) for e in examples]}
    if context is not None:
      body["context"] = _jsonable(context)
    if signature_name:
      body["signature_name"] = signature_name
    return body

  def classify(self, examples, context=None, signature_name=None):
    """The classify API: per example a list of (label, score) pairs."""
    out = self._request(":classify", self._examples_body(examples, context, signature_name))
    return [[(str(c[0]), float(c[1])) for c in r] for r in out["results"]]

  def regress(self, examples, context=None, signature_name=None):
    """The regress API: one float per example, as an ndarray."""
    out = self._request(":regress", self._examples_body(examples, context, signature_name))
    return np.asarray(out["results"], dtype=np.float32)

  def metadata(self):
    """GET .../metadata: {"model_spec": ..., "metadata": {"signature_def": ...}}."""
    return self._request("/metadata")

  def status(self):
    """GET the model (version) status: {"model_version_status": [...]}."""
    return self._request("")
