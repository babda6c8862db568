"""The `checkpoint` state file (TF's CheckpointState in protobuf text format) and
the functions that read it: get_checkpoint_state, latest_checkpoint,
checkpoint_exists, update_checkpoint_state."""

import glob
import logging
import os
import re

_logger = logging.getLogger("recflow")


class CheckpointState(object):
  """TF's CheckpointState message: model_checkpoint_path and
  all_model_checkpoint_paths (oldest first)."""

  def __init__(self, model_checkpoint_path="", all_model_checkpoint_paths=None,
               all_model_checkpoint_timestamps=None, last_preserved_timestamp=0.0):
    self.model_checkpoint_path = model_checkpoint_path
    self.all_model_checkpoint_paths = list(all_model_checkpoint_paths or [])
    self.all_model_checkpoint_timestamps = list(all_model_checkpoint_timestamps or [])
    self.last_preserved_timestamp = last_preserved_timestamp

  def __str__(self):
    out = []
    if self.model_checkpoint_path:
      out.append("model_checkpoint_path: %s" % _quote(self.model_checkpoint_path))
    for p in self.all_model_checkpoint_paths:
      out.append("all_model_checkpoint_paths: %s" % _quote(p))
    for t in self.all_model_checkpoint_timestamps:
      out.append("all_model_checkpoint_timestamps: %r" % float(t))
    if self.last_preserved_timestamp:
      out.append("last_preserved_timestamp: %r" % float(self.last_preserved_timestamp))
    return "".join(line + "\n" for line in out)

  def __repr__(self):
    return "CheckpointState(%r, %r)" % (self.model_checkpoint_path,
                                        self.all_model_checkpoint_paths)

  def __eq__(self, other):
    return isinstance(other, CheckpointState) and str(self) == str(other)


def _quote(s):
  """A protobuf text-format string literal (C escapes, as TF writes them)."""
  if isinstance(s, str):
    s = s.encode("utf-8")
  out = []
  for b in s:
    c = chr(b)
    if c == "\n":
      out.append("\\n")
    elif c == "\r":
      out.append("\\r")
    elif c == "\t":
      out.append("\\t")
    elif c in "\"'\\":
      out.append("\\" + c)
    elif 32 <= b < 127:
      out.append(c)
    else:
      out.append("\\%03o" % b)
  return '"' + "".join(out) + '"'


_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", "'": b"'", '"': b'"', "a": b"\a",
            "b": b"\b", "f": b"\f", "v": b"\v", "?": b"?"}


def _unquote(lit):
  body = lit[1:-1]
  out = bytearray()
  i = 0
  while i < len(body):
    c = body[i]
    if c != "\\":
      out += c.encode("utf-8")
      i += 1
      continue
    n = body[i + 1]
    if n in _ESCAPES:
      out += _ESCAPES[n]
      i += 2
    elif n in "01234567":
      m = re.match(r"[0-7]{1,3}", body[i + 1:])
      out.append(int(m.group(0), 8) & 0xFF)
      i += 1 + len(m.group(0))
    elif n in "xX":
      m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
      out.append(int(m.group(0), 16))
      i += 2 + len(m.group(0))
    else:
      raise ValueError("bad escape \\%s" % n)
  return out.decode("utf-8")


_FIELD = re.compile(r'\s*([A-Za-z_]+)\s*:\s*("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[^\s]+)')


def parse_checkpoint_state(text):
  """A CheckpointState from its text format; ValueError if it is not one."""
  state = CheckpointState()
  pos = 0
  text = text.strip()
  while pos < len(text):
    m = _FIELD.match(text, pos)
    if not m:
      raise ValueError("cannot parse checkpoint state at %r" % text[pos:pos + 40])
    key, value = m.group(1), m.group(2)
    if key == "model_checkpoint_path":
      state.model_checkpoint_path = _unquote(value)
    elif key == "all_model_checkpoint_paths":
      state.all_model_checkpoint_paths.append(_unquote(value))
    elif key == "all_model_checkpoint_timestamps":
      state.all_model_checkpoint_timestamps.append(float(value))
    elif key == "last_preserved_timestamp":
      state.last_preserved_timestamp = float(value)
    else:
      raise ValueError("unknown field %r in checkpoint state" % key)
    pos = m.end()
    while pos < len(text) and text[pos].isspace():
      pos += 1
  return state


def _state_path(save_dir, latest_filename=None):
  return os.path.join(save_dir, latest_filename or "checkpoint")


def generate_checkpoint_state_proto(save_dir, model_checkpoint_path,
                                    all_model_checkpoint_paths=None,
                                    all_model_checkpoint_timestamps=None,
                                    last_preserved_timestamp=None):
  all_paths = list(all_model_checkpoint_paths or [])
  if not all_paths or all_paths[-1] != model_checkpoint_path:
    all_paths.append(model_checkpoint_path)
  if not os.path.isabs(save_dir):
    if not os.path.isabs(model_checkpoint_path):
      model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
    all_paths = [p if os.path.isabs(p) else os.path.relpath(p, save_dir) for p in all_paths]
  return CheckpointState(model_checkpoint_path, all_paths, all_model_checkpoint_timestamps,
                         last_preserved_timestamp or 0.0)


def update_checkpoint_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                            latest_filename=None, all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp=None, save_relative_paths=False):
  """Writes save_dir/checkpoint (atomically: a temporary file renamed)."""
  if save_relative_paths:
    def rel(p):
      return os.path.relpath(p, save_dir) if os.path.isabs(p) else p
    model_checkpoint_path = rel(model_checkpoint_path)
    all_model_checkpoint_paths = [rel(p) for p in (all_model_checkpoint_paths or [])]
  state = generate_checkpoint_state_proto(save_dir, model_checkpoint_path,
                                          all_model_checkpoint_paths,
                                          all_model_checkpoint_timestamps,
                                          last_preserved_timestamp)
  path = _state_path(save_dir, latest_filename)
  if os.path.abspath(path) == os.path.abspath(model_checkpoint_path):
    raise RuntimeError("Save path '%s' conflicts with path used for checkpoint state.  Please "
                       "use a different save path." % model_checkpoint_path)
  tmp = "%s.tmp%d" % (path, os.getpid())
  with open(tmp, "w") as f:
    f.write(str(state))
  os.replace(tmp, path)


update_checkpoint_state_internal = update_checkpoint_state


def get_checkpoint_state(checkpoint_dir, latest_filename=None):
  """The CheckpointState in checkpoint_dir (relative paths resolved against the
  directory, as TF does), or None when there is no state file."""
  path = _state_path(checkpoint_dir, latest_filename)
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      state = parse_checkpoint_state(f.read())
  except (ValueError, UnicodeDecodeError):
    _logger.warning("%s: Checkpoint ignored", path)
    return None
  if not state.model_checkpoint_path:
    raise ValueError("Invalid checkpoint state loaded from " + checkpoint_dir)
  if not os.path.isabs(state.model_checkpoint_path):
    state.model_checkpoint_path = os.path.join(checkpoint_dir, state.model_checkpoint_path)
  state.all_model_checkpoint_paths = [
      p if os.path.isabs(p) else os.path.join(checkpoint_dir, p)
      for p in state.all_model_checkpoint_paths]
  return state


def checkpoint_exists(checkpoint_prefix):
  """Whether a V2 checkpoint (prefix.index) or a V1 file matching the pattern exists."""
  if os.path.exists(checkpoint_prefix + ".index"):
    return True
  return bool(glob.glob(checkpoint_prefix))


def latest_checkpoint(checkpoint_dir, latest_filename=None):
  """The prefix of the newest checkpoint recorded in checkpoint_dir, or None."""
  state = get_checkpoint_state(checkpoint_dir, latest_filename)
  if state and state.model_checkpoint_path:
    if checkpoint_exists(state.model_checkpoint_path):
      return state.model_checkpoint_path
    _logger.error("Couldn't match files for checkpoint %s", state.model_checkpoint_path)
  return None


def get_checkpoint_mtimes(checkpoint_prefixes):
  out = []
  for prefix in checkpoint_prefixes:
    for p in (prefix + ".index", prefix):
      if os.path.exists(p):
        out.append(os.path.getmtime(p))
        break
  return out


def remove_checkpoint(checkpoint_prefix, checkpoint_format_version=2, meta_graph_suffix="meta"):
  """Deletes a checkpoint's files (index, data shards, .meta)."""
  paths = [checkpoint_prefix + ".index", checkpoint_prefix + "." + meta_graph_suffix]
  paths += glob.glob(glob.escape(checkpoint_prefix) + ".data-?????-of-?????")
  if checkpoint_format_version != 2:
    paths.append(checkpoint_prefix)
  for p in paths:
    try:
      os.remove(p)
    except OSError:
      pass
