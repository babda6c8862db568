"""Starting `recflow serve` on a SavedModel base path and calling its REST API
(shared by the tests that serve what Python exported)."""

import json
import os
import re
import subprocess
import threading
import urllib.request

import pytest

from conftest import build_dir


def cli_or_skip():
  cli = os.path.join(build_dir(), "recflow")
  if not os.path.exists(cli):
    pytest.skip("the recflow CLI is not built (%s)" % cli)
  return cli


class Server(object):
  """`recflow serve --model_name=NAME --model_base_path=BASE` on a free REST port."""

  def __init__(self, name, base):
    self.name = name
    self._proc = subprocess.Popen(
        [cli_or_skip(), "serve", "--port=0", "--rest_api_port=auto", "--model_name=" + name,
         "--model_base_path=" + str(base), "--file_system_poll_wait_seconds=0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines, found = [], []

    def read():
      for raw in self._proc.stdout:
        line = raw.decode(errors="replace")
        lines.append(line)
        m = re.search(r"serving model %s version \d+ on http://([\d.]+):(\d+)" % name, line)
        if m:
          found.append((m.group(1), int(m.group(2))))
          return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(120)
    if not found:
      self.close()
      raise AssertionError("no 'serving model' line from recflow serve:\n" + "".join(lines))
    self.host, self.port = found[0]

  def predict(self, body):
    req = urllib.request.Request(
        "http://%s:%d/v1/models/%s:predict" % (self.host, self.port, self.name),
        data=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
        method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
      return json.loads(resp.read().decode())

  def close(self):
    self._proc.terminate()
    try:
      self._proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      self._proc.kill()
      self._proc.wait()
    self._proc.stdout.close()

  def __enter__(self):
    return self

  def __exit__(self, *unused):
    self.close()
