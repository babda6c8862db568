"""The `checkpoint` state file (TF's CheckpointState in protobuf text format) and
the functions that read it: get_checkpoint_state, latest_checkpoint,
checkpoint_exists, update_checkpoint_state. The text format is read and
written by the protobuf bridge (framework/proto_bridge.py)."""

import glob
import logging
import os

from recflow.framework import proto_bridge

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

  def _as_dict(self):
    d = {}
    if self.model_checkpoint_path:
      d["model_checkpoint_path"] = self.model_checkpoint_path
    if self.all_model_checkpoint_paths:
      d["all_model_checkpoint_paths"] = list(self.all_model_checkpoint_paths)
    if self.all_model_checkpoint_timestamps:
      d["all_model_checkpoint_timestamps"] = [float(t) for t in
                                              self.all_model_checkpoint_timestamps]
    if self.last_preserved_timestamp:
      d["last_preserved_timestamp"] = float(self.last_preserved_timestamp)
    return d

  def SerializeToString(self):  # pylint: disable=invalid-name
    return proto_bridge.encode("tensorflow.CheckpointState", self._as_dict())

  def __str__(self):
    """The protobuf text format (as TF writes the `checkpoint` file)."""
    return proto_bridge.to_text("tensorflow.CheckpointState", self.SerializeToString())

  def __repr__(self):
    return "CheckpointState(%r, %r)" % (self.model_checkpoint_path,
                                        self.all_model_checkpoint_paths)

  def __eq__(self, other):
    return isinstance(other, CheckpointState) and str(self) == str(other)


def parse_checkpoint_state(text):
  """A CheckpointState from its text format; ValueError if it is not one."""
  try:
    d = proto_bridge.decode("tensorflow.CheckpointState",
                            proto_bridge.from_text("tensorflow.CheckpointState", text))
  except ValueError as e:
    raise ValueError("cannot parse checkpoint state: %s" % e)
  return CheckpointState(d.get("model_checkpoint_path", ""),
                         d.get("all_model_checkpoint_paths", []),
                         [float(t) for t in d.get("all_model_checkpoint_timestamps", [])],
                         float(d.get("last_preserved_timestamp", 0.0)))


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
