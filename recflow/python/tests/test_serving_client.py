"""recflow.client.rest and recflow.client.grpc against `recflow serve`: a
SavedModel exported from Python, predictions over REST (row and columnar) and
gRPC equal to the Session's, metadata and status, and the errors (unknown
model: the server's message; server down: ServingUnavailableError)."""

import re
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow.client import grpc as grpc_client
from recflow.client import rest
from recflow.client.serving_util import ServingError, ServingUnavailableError

from test_saver import recflow_cli

X = np.random.RandomState(4).randn(5, 3).astype(np.float32)


def export_model(export_dir):
  with tf.Graph().as_default(), tf.Session() as sess:
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.get_variable("w", [3, 2], initializer=tf.random_normal_initializer(seed=2))
    logits = tf.matmul(x, w)
    prob = tf.sigmoid(logits, name="prob")
    sess.run(tf.global_variables_initializer())
    tf.saved_model.simple_save(sess, export_dir, {"x": x}, {"prob": prob, "logits": logits})
    return sess.run({"prob": prob, "logits": logits}, {x: X})


@pytest.fixture(scope="module")
def server(tmp_path_factory):
  cli = recflow_cli()
  if cli is None:
    pytest.skip("no recflow binary (build/recflow) to serve the model with")
  base = tmp_path_factory.mktemp("served")
  expected = export_model(str(base / "1"))
  proc = subprocess.Popen([cli, "serve", "--port=auto", "--rest_api_port=auto",
                           "--model_name=m", "--model_base_path=" + str(base),
                           "--file_system_poll_wait_seconds=0"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  lines, ports = [], {}

  def read():
    for raw in proc.stdout:
      line = raw.decode(errors="replace")
      lines.append(line)
      m = re.search(r"serving model m version 1 on (grpc|http)://([\d.]+):(\d+)", line)
      if m:
        ports[m.group(1)] = (m.group(2), int(m.group(3)))
        if len(ports) == 2:
          return

  reader = threading.Thread(target=read, daemon=True)
  reader.start()
  reader.join(60)
  try:
    assert len(ports) == 2, "no 'serving model' lines from recflow serve:\n" + "".join(lines)
    yield ports, expected
  finally:
    proc.terminate()
    try:
      proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
    proc.stdout.close()


def test_rest_predict_row_and_columnar(server):
  ports, expected = server
  host, port = ports["http"]
  c = rest.Client(host, port, "m")
  assert c.url == "http://%s:%d/v1/models/m" % (host, port)
  rows = c.predict(instances=X)
  assert sorted(rows) == ["logits", "prob"]
  np.testing.assert_allclose(rows["prob"], expected["prob"], rtol=1e-5)
  np.testing.assert_allclose(rows["logits"], expected["logits"], rtol=1e-5, atol=1e-6)
  cols = c.predict(inputs={"x": X}, signature_name="serving_default")
  np.testing.assert_allclose(cols["prob"], expected["prob"], rtol=1e-5)
  v1 = rest.Client(host, port, "m", version=1).predict(instances=[{"x": X[0].tolist()}])
  np.testing.assert_allclose(v1["prob"], expected["prob"][:1], rtol=1e-5)
  status = c.status()["model_version_status"]
  assert status[0]["version"] == "1" and status[0]["state"] == "AVAILABLE"
  sig = c.metadata()["metadata"]["signature_def"]["signature_def"]["serving_default"]
  assert sorted(sig["outputs"]) == ["logits", "prob"]


def test_grpc_predict_metadata_status(server):
  ports, expected = server
  host, port = ports["grpc"]
  with grpc_client.Client(host, port, "m") as c:
    out = c.predict({"x": X})
    assert sorted(out) == ["logits", "prob"]
    assert out["prob"].dtype == np.float32 and out["prob"].shape == (5, 2)
    np.testing.assert_allclose(out["prob"], expected["prob"], rtol=1e-5)
    only = c.predict(X, output_filter=["logits"])  # one input: named by the metadata
    assert list(only) == ["logits"]
    np.testing.assert_allclose(only["logits"], expected["logits"], rtol=1e-5, atol=1e-6)
    status = c.status()["model_version_status"]
    assert status[0]["version"] == "1" and status[0]["state"] == "AVAILABLE"
    sig = c.metadata()["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert sig["inputs"]["x"]["name"] == "x:0"
  out = grpc_client.Client(host, port, "m", version=1).predict({"x": X[:2]})
  np.testing.assert_allclose(out["prob"], expected["prob"][:2], rtol=1e-5)


def test_server_errors_carry_its_message(server):
  ports, _ = server
  r = rest.Client(*ports["http"], model="nope")
  with pytest.raises(ServingError, match="nope") as e:
    r.predict(instances=X)
  assert e.value.code == 404 and "nope" in e.value.message
  g = grpc_client.Client(*ports["grpc"], model="nope")
  with pytest.raises(ServingError, match="nope") as e:
    g.predict({"x": X})
  assert e.value.code == "NOT_FOUND"
  m = rest.Client(*ports["http"], model="m")
  with pytest.raises(ServingError) as e:
    m.predict(inputs={"wrong": X})
  assert e.value.code == 400 and "wrong" in e.value.message
  with pytest.raises(ServingError) as e:
    grpc_client.Client(*ports["grpc"], model="m", version=7).predict({"x": X})
  assert "7" in e.value.message
  # A predict-only model has no regression signature: the server says so.
  with pytest.raises(ServingError):
    rest.Client(*ports["http"], model="m").regress([{"x": [1.0, 2.0, 3.0]}])
  with pytest.raises(ServingError):
    grpc_client.Client(*ports["grpc"], model="m").classify([{"x": [1.0, 2.0, 3.0]}])


def _closed_port():
  s = socket.socket()
  s.bind(("127.0.0.1", 0))
  port = s.getsockname()[1]
  s.close()
  return port


def test_server_down_is_a_clear_error():
  port = _closed_port()
  with pytest.raises(ServingUnavailableError, match="cannot reach the model server"):
    rest.Client("127.0.0.1", port, "m").predict(instances=X)
  with pytest.raises(ServingUnavailableError, match="cannot reach the model server"):
    grpc_client.Client("127.0.0.1", port, "m", timeout=5).predict({"x": X})
  assert issubclass(ServingUnavailableError, ConnectionError)


def test_client_argument_checks():
  with pytest.raises(ValueError):
    rest.Client("127.0.0.1", 1, "")
  with pytest.raises(ValueError):
    rest.Client("127.0.0.1", 1, "m", version=1, label="a")
  with pytest.raises(ValueError):
    rest.Client("127.0.0.1", 1, "m", version=-1)
  with pytest.raises(ValueError):
    rest.Client("127.0.0.1", 1, "m").predict()
  assert rest.Client("h", 1, "m", label="stable").url == "http://h:1/v1/models/m/labels/stable"
  assert rest.Client("h", 1, "m", version=3).url == "http://h:1/v1/models/m/versions/3"
  with pytest.raises(TypeError):
    grpc_client.Client("127.0.0.1", 1, "m").classify({"x": 1.0})


def test_missing_grpcio_names_the_package(monkeypatch):
  monkeypatch.setitem(sys.modules, "grpc", None)  # import grpc now fails
  with pytest.raises(ImportError, match="python3-grpcio"):
    grpc_client.Client("127.0.0.1", 1, "m")
