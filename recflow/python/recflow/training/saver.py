"""tf.train.Saver: V2 (tensor bundle) checkpoints through SaveV2/RestoreV2 nodes
named as TensorFlow names them ("save/Const", "save/SaveV2",
"save/control_dependency", "save/RestoreV2", "save/restore_all"), so the files
are readable by TensorFlow and by recflow's C++ checkpoint reader."""

import logging
import os
import time
import uuid

from recflow.framework import dtypes
from recflow.framework import errors
from recflow.framework import ops
from recflow.framework import proto_bridge
from recflow.framework.constant_op import constant
from recflow.ops import array_ops
from recflow.ops import control_flow_ops
from recflow.ops import gen_ops as gen
from recflow.ops import state_ops
from recflow.ops import variables
from recflow.training import checkpoint_management
from recflow.training import py_checkpoint_reader
from recflow.training import training_util

_logger = logging.getLogger("recflow")


class SaverDef(object):
  """TF's SaverDef message (the fields; serialized through the protobuf bridge)."""

  LEGACY = 0
  V1 = 1
  V2 = 2

  def __init__(self, filename_tensor_name="", save_tensor_name="", restore_op_name="",
               max_to_keep=0, sharded=False, keep_checkpoint_every_n_hours=0.0, version=V2):
    self.filename_tensor_name = filename_tensor_name
    self.save_tensor_name = save_tensor_name
    self.restore_op_name = restore_op_name
    self.max_to_keep = max_to_keep
    self.sharded = sharded
    self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
    self.version = version

  def _as_dict(self):
    return {"filename_tensor_name": self.filename_tensor_name,
            "save_tensor_name": self.save_tensor_name,
            "restore_op_name": self.restore_op_name, "max_to_keep": int(self.max_to_keep),
            "sharded": bool(self.sharded),
            "keep_checkpoint_every_n_hours": float(self.keep_checkpoint_every_n_hours),
            "version": int(self.version)}

  @classmethod
  def _from_dict(cls, d):
    return cls(filename_tensor_name=d.get("filename_tensor_name", ""),
               save_tensor_name=d.get("save_tensor_name", ""),
               restore_op_name=d.get("restore_op_name", ""),
               max_to_keep=int(d.get("max_to_keep", 0)), sharded=bool(d.get("sharded", False)),
               keep_checkpoint_every_n_hours=float(d.get("keep_checkpoint_every_n_hours", 0.0)),
               version=int(d.get("version", cls.LEGACY)))

  def SerializeToString(self):  # pylint: disable=invalid-name
    return proto_bridge.encode("tensorflow.SaverDef", self._as_dict())

  @classmethod
  def FromString(cls, serialized):  # pylint: disable=invalid-name
    return cls._from_dict(proto_bridge.decode("tensorflow.SaverDef", serialized,
                                              enums_as_ints=True))

  def __repr__(self):
    return ("SaverDef(filename_tensor_name=%r, save_tensor_name=%r, restore_op_name=%r, "
            "max_to_keep=%d, sharded=%r, keep_checkpoint_every_n_hours=%r, version=%d)" %
            (self.filename_tensor_name, self.save_tensor_name, self.restore_op_name,
             self.max_to_keep, self.sharded, self.keep_checkpoint_every_n_hours,
             self.version))


def _meta_graph_bytes(graph, saver_def):
  """A MetaGraphDef with meta_info_def (version), graph_def and saver_def."""
  graph_def = proto_bridge.decode("tensorflow.GraphDef",
                                  graph.as_graph_def().SerializeToString())
  return proto_bridge.encode("tensorflow.MetaGraphDef", {
      "meta_info_def": {"tensorflow_version": "1.15.0"},
      "graph_def": graph_def,
      "saver_def": saver_def._as_dict()})  # pylint: disable=protected-access


# --- What gets saved ---------------------------------------------------------

class SaveSpec(object):
  def __init__(self, tensor, slice_spec, name, dtype=None):
    self.tensor = tensor
    self.slice_spec = slice_spec
    self.name = name
    self.dtype = dtype or tensor.dtype.base_dtype


class SaveableObject(object):
  """Something a Saver saves: specs (tensors with checkpoint keys) and restore()."""

  def __init__(self, op, specs, name):
    self.op = op
    self.specs = specs
    self.name = name

  def restore(self, restored_tensors, restored_shapes):
    raise NotImplementedError()


class _VariableSaveable(SaveableObject):

  def __init__(self, var, name):
    self._var = var
    if getattr(var, "_is_resource_variable", False):
      with ops.colocate_with(var.handle):
        tensor = array_ops.identity(gen.read_variable_op(var.handle, dtype=var.dtype))
    else:
      tensor = var._ref()  # pylint: disable=protected-access
    super(_VariableSaveable, self).__init__(var, [SaveSpec(tensor, "", name,
                                                           var.dtype.base_dtype)], name)

  def restore(self, restored_tensors, restored_shapes):
    value = restored_tensors[0]
    if restored_shapes is not None:
      value = array_ops.reshape(value, restored_shapes[0])
    if getattr(self._var, "_is_resource_variable", False):
      return gen.assign_variable_op(self._var.handle, value)
    shape = self._var.get_shape()
    return state_ops.assign(self._var, value,
                            validate_shape=restored_shapes is None and shape.is_fully_defined())


def _var_key(v):
  return v.op.name


def _slice_info(var):
  return getattr(var, "_save_slice_info", None)


def op_list_to_dict(op_list):
  """{checkpoint key: variable} for a list of variables (keys: their op names).

  As TF's saveable_object_util.op_list_to_dict: a PartitionedVariable, or the
  parts of one (variables with a save_slice_info), go under the full name as
  a list of parts, saved as one sliced entry.
  """
  if not isinstance(op_list, (list, tuple, set)):
    raise TypeError("Variables to save should be passed in a dict or a list: %s" % op_list)
  op_list = sorted(op_list, key=lambda x: x.name)
  names = {}
  for var in op_list:
    if isinstance(var, SaveableObject):
      names[var.name] = var
      continue
    if isinstance(var, variables.PartitionedVariable):
      if var.name in names:
        raise ValueError("At least two variables have the same name: %s" % var.name)
      names[var.name] = list(var._get_variable_list())  # pylint: disable=protected-access
      continue
    if not isinstance(var, variables.Variable):
      raise TypeError("Variable to save is not a Variable: %s" % (var,))
    info = _slice_info(var)
    if info is not None:
      parts = names.setdefault(info.full_name, [])
      if not isinstance(parts, list):
        raise ValueError("Mixing slices and non-slices with the same name: %s" % info.full_name)
      if not any(p is var for p in parts):
        parts.append(var)
      continue
    name = _var_key(var)
    if name in names:
      if names[name] is var:
        continue
      raise ValueError("At least two variables have the same name: %s" % name)
    names[name] = var
  return names


class _SliceSaveable(_VariableSaveable):
  """One part of a partitioned variable: saved and restored as the slice
  save_slice_info.spec of the entry `name` (TF's sliced checkpoint entries)."""

  def __init__(self, var, name):
    super(_SliceSaveable, self).__init__(var, name)
    self.specs[0].slice_spec = _slice_info(var).spec

  def restore(self, restored_tensors, restored_shapes):
    return super(_SliceSaveable, self).restore(restored_tensors, None)


def _saveables(names_to_vars):
  out = []
  seen = set()
  for name, var in sorted(names_to_vars.items(), key=lambda x: x[0]):
    if isinstance(var, SaveableObject):
      out.append(var)
      continue
    if isinstance(var, variables.PartitionedVariable):
      var = list(var._get_variable_list())  # pylint: disable=protected-access
    if isinstance(var, list):
      full_name = None
      for part in var:
        if not isinstance(part, variables.Variable):
          raise ValueError("Slices must all be Variables: %s" % (part,))
        if _slice_info(part) is None:
          raise ValueError("Slices must all be slices: %s" % (part,))
        if full_name is None:
          full_name = _slice_info(part).full_name
        elif full_name != _slice_info(part).full_name:
          raise ValueError("Slices must all be from the same tensor: %s != %s" %
                           (full_name, _slice_info(part).full_name))
        if id(part) in seen:
          raise ValueError("The same saveable will be restored with two names: %s" % name)
        seen.add(id(part))
        out.append(_SliceSaveable(part, name))
      continue
    if isinstance(var, ops.Tensor) or not isinstance(var, variables.Variable):
      raise TypeError("Saver: %r is not a Variable (saving plain tensors is not supported by "
                      "recflow)" % (var,))
    if id(var) in seen:
      raise ValueError("The same saveable will be restored with two names: %s" % name)
    seen.add(id(var))
    out.append(_VariableSaveable(var, name))
  return out


def _legacy_part_saveables(saveables):
  """The saveables as recflow saved partitioned variables before it wrote
  sliced entries: each part whole under "<name>/part_<i>" (i in offset
  order). None when no saveable is a slice."""
  if not any(isinstance(s, _SliceSaveable) for s in saveables):
    return None
  by_name = {}
  for s in saveables:
    if isinstance(s, _SliceSaveable):
      by_name.setdefault(s.name, []).append(s)
  legacy_name = {}
  for name, parts in by_name.items():
    parts.sort(key=lambda s: _slice_info(s.op).var_offset)
    for i, s in enumerate(parts):
      legacy_name[id(s)] = "%s/part_%d" % (name, i)
  out = []
  for s in saveables:
    if isinstance(s, _SliceSaveable):
      out.append(_VariableSaveable(s.op, legacy_name[id(s)]))
    else:
      out.append(s)
  return out


class BaseSaverBuilder(object):
  """Adds the save and restore nodes of a Saver to the graph."""

  SaveSpec = SaveSpec
  SaveableObject = SaveableObject

  def __init__(self, write_version=SaverDef.V2):
    if write_version != SaverDef.V2:
      raise NotImplementedError("recflow writes V2 (tensor bundle) checkpoints only")
    self._write_version = write_version

  def _save_op(self, filename_tensor, saveables):
    names, tensors, slices = [], [], []
    for s in saveables:
      for spec in s.specs:
        names.append(spec.name)
        tensors.append(spec.tensor)
        slices.append(spec.slice_spec)
    return gen.save_v2(filename_tensor, constant(names, dtype=dtypes.string, name="SaveV2/"
                                                 "tensor_names"),
                       constant(slices, dtype=dtypes.string, name="SaveV2/shape_and_slices"),
                       tensors, name="SaveV2")

  def _add_save_ops(self, filename_tensor, saveables):
    save = self._save_op(filename_tensor, saveables)
    return control_flow_ops.with_dependencies([save], filename_tensor)

  def _add_sharded_save_ops(self, filename_tensor, saveables):
    # One device in recflow: one shard, written under a temporary prefix and
    # merged into the final one, as TF does.
    with ops.device("/device:CPU:0"):
      suffix = constant("_temp_%s/part" % uuid.uuid4().hex, name="StringJoin/inputs_1")
      tmp_prefix = gen.string_join([filename_tensor, suffix], name="StringJoin")
      num_shards = constant(1, name="num_shards")
      shard = constant(0, name="ShardedFilename/shard")
      sharded = gen.sharded_filename(tmp_prefix, shard, num_shards, name="ShardedFilename")
      save = self._save_op(sharded, saveables)
      with ops.control_dependencies([save]):
        shard_file = array_ops.identity(sharded, name="control_dependency")
      merge = gen.merge_v2_checkpoints(array_ops.stack([shard_file]), filename_tensor,
                                       delete_old_dirs=True, name="MergeV2Checkpoints")
      with ops.control_dependencies([merge]):
        return array_ops.identity(filename_tensor, name="Identity")

  def _add_restore_ops(self, filename_tensor, saveables, reshape, name="restore_all"):
    names, slices, dts = [], [], []
    for s in saveables:
      for spec in s.specs:
        names.append(spec.name)
        slices.append(spec.slice_spec)
        dts.append(spec.dtype)
    restored = gen.restore_v2(filename_tensor,
                              constant(names, dtype=dtypes.string,
                                       name="RestoreV2/tensor_names"),
                              constant(slices, dtype=dtypes.string,
                                       name="RestoreV2/shape_and_slices"),
                              dtypes=dts, name="RestoreV2")
    if isinstance(restored, ops.Tensor):
      restored = [restored]
    assign_ops = []
    i = 0
    for s in saveables:
      n = len(s.specs)
      tensors = list(restored[i:i + n])
      i += n
      shapes = None
      if reshape:
        shapes = [s.op.get_shape() if isinstance(s.op, variables.Variable) else None]
      op = s.restore(tensors, shapes)
      assign_ops.append(op.op if isinstance(op, ops.Tensor) else op)
    return control_flow_ops.group(*assign_ops, name=name)

  def build(self, names_to_saveables, reshape=False, sharded=False, max_to_keep=5,
            keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
            filename="model"):
    saveables = _saveables(names_to_saveables)
    with ops.name_scope(name, "save", [s.op for s in saveables]) as name:
      filename_tensor = constant(filename or "model", dtype=dtypes.string, name="Const")
      if sharded:
        save_tensor = self._add_sharded_save_ops(filename_tensor, saveables)
      else:
        save_tensor = self._add_save_ops(filename_tensor, saveables)
      if sharded:
        # One device: one shard's restore ("save/restore_shard"), grouped as TF does.
        with ops.device("/device:CPU:0"):
          shard = self._add_restore_ops(filename_tensor, saveables, reshape,
                                        name="restore_shard")
        restore_op = control_flow_ops.group(shard, name="restore_all")
      else:
        restore_op = self._add_restore_ops(filename_tensor, saveables, reshape)
      # Checkpoints recflow wrote before it saved partitioned variables as
      # sliced entries hold "<name>/part_<i>"; Saver.restore runs this op
      # for them (it is not part of the SaverDef).
      legacy = _legacy_part_saveables(saveables)
      self.legacy_parts_restore_op = None
      self.sliced_names = sorted({s.name for s in saveables if isinstance(s, _SliceSaveable)})
      if legacy is not None:
        self.legacy_parts_restore_op = self._add_restore_ops(
            filename_tensor, legacy, reshape, name="restore_legacy_parts")
    return SaverDef(filename_tensor_name=filename_tensor.name,
                    save_tensor_name=save_tensor.name,
                    restore_op_name=restore_op.name, max_to_keep=max_to_keep or 0,
                    sharded=sharded,
                    keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
                    version=self._write_version)


BulkSaverBuilder = BaseSaverBuilder


def _default_var_list(graph):
  out = list(graph.get_collection(ops.GraphKeys.GLOBAL_VARIABLES))
  out += list(graph.get_collection(ops.GraphKeys.SAVEABLE_OBJECTS))
  return out


class Saver(object):
  """TF 1.x's tf.train.Saver over V2 checkpoints (a prefix with .index and
  .data-00000-of-00001 files, a .meta file, and the `checkpoint` state file)."""

  def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
               keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
               saver_def=None, builder=None, defer_build=False, allow_empty=False,
               write_version=SaverDef.V2, pad_step_number=False, save_relative_paths=False,
               filename=None):
    if defer_build and var_list:
      raise ValueError("If `var_list` is provided then build cannot be deferred. Either set "
                       "defer_build=False or var_list=None.")
    self._var_list = var_list
    self._reshape = reshape
    self._sharded = sharded
    self._max_to_keep = max_to_keep
    self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
    self._name = name
    self._restore_sequentially = restore_sequentially
    self.saver_def = saver_def
    self._builder = builder
    self._allow_empty = allow_empty
    self._write_version = write_version
    self._pad_step_number = pad_step_number
    self._save_relative_paths = save_relative_paths
    self._filename = filename
    self._is_built = False
    self._legacy_parts_restore_op = None
    self._sliced_names = []
    self._is_empty = None
    self._last_checkpoints = []  # (path, time saved), oldest first
    self._checkpoints_to_be_deleted = []
    self._next_checkpoint_time = time.time() + keep_checkpoint_every_n_hours * 3600
    self._graph = None
    if not defer_build:
      self.build()

  def build(self):
    if self._is_built:
      return
    self._graph = ops.get_default_graph()
    if self.saver_def is not None:
      self._is_built = True
      return
    var_list = self._var_list
    if var_list is None:
      var_list = _default_var_list(self._graph)
    if isinstance(var_list, dict):
      # A PartitionedVariable (or a list of parts) is one sliced entry "<key>".
      names_to_saveables = dict(var_list)
    else:
      names_to_saveables = op_list_to_dict(list(var_list))
    if not names_to_saveables:
      if self._allow_empty:
        self._is_empty = True
        self._is_built = True
        return
      raise ValueError("No variables to save")
    self._is_empty = False
    builder = self._builder or BaseSaverBuilder(self._write_version)
    self.saver_def = builder.build(
        names_to_saveables, reshape=self._reshape, sharded=self._sharded,
        max_to_keep=self._max_to_keep,
        keep_checkpoint_every_n_hours=self._keep_checkpoint_every_n_hours, name=self._name,
        restore_sequentially=self._restore_sequentially, filename=self._filename)
    self._legacy_parts_restore_op = getattr(builder, "legacy_parts_restore_op", None)
    self._sliced_names = getattr(builder, "sliced_names", [])
    self._is_built = True

  def as_saver_def(self):
    return self.saver_def

  @property
  def last_checkpoints(self):
    return [p for p, _ in self._last_checkpoints]

  def set_last_checkpoints(self, last_checkpoints):
    self._last_checkpoints = [(p, None) for p in last_checkpoints]

  def set_last_checkpoints_with_time(self, last_checkpoints_with_time):
    self._last_checkpoints = list(last_checkpoints_with_time)

  def recover_last_checkpoints(self, checkpoint_paths):
    """Takes over the existing checkpoints among checkpoint_paths (with their
    modification times), so that max_to_keep counts them."""
    mtimes = checkpoint_management.get_checkpoint_mtimes(checkpoint_paths)
    existing = [p for p in checkpoint_paths if checkpoint_management.checkpoint_exists(p)]
    self.set_last_checkpoints_with_time(list(zip(existing, mtimes)))

  def _record_last_checkpoint(self, path):
    if not self.saver_def.max_to_keep:
      return
    self._last_checkpoints = [(p, t) for p, t in self._last_checkpoints if p != path]
    self._last_checkpoints.append((path, time.time()))
    while len(self._last_checkpoints) > self.saver_def.max_to_keep:
      self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

  def _maybe_delete_old_checkpoints(self, meta_graph_suffix="meta"):
    """Deletes the checkpoints max_to_keep pushed out (after the state file
    stopped naming them), keeping one per keep_checkpoint_every_n_hours."""
    while self._checkpoints_to_be_deleted:
      p, t = self._checkpoints_to_be_deleted.pop(0)
      if t is not None and t > self._next_checkpoint_time and \
         self.saver_def.keep_checkpoint_every_n_hours:
        self._next_checkpoint_time += self.saver_def.keep_checkpoint_every_n_hours * 3600
        continue
      checkpoint_management.remove_checkpoint(p, meta_graph_suffix=meta_graph_suffix)

  def save(self, sess, save_path, global_step=None, latest_filename=None,
           meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
           strip_default_attrs=False, save_debug_info=False):
    """Saves the variables to save_path (-<global_step>); returns the checkpoint
    prefix, records it in the `checkpoint` file of its directory."""
    if not self._is_built:
      raise RuntimeError("`build()` should be called before save if defer_build==True")
    if latest_filename is None:
      latest_filename = "checkpoint"
    if os.path.split(latest_filename)[0]:
      raise ValueError("'latest_filename' must not contain path components")
    if global_step is not None:
      if not isinstance(global_step, int):
        global_step = training_util.global_step(sess, global_step)
      checkpoint_file = ("%s-%08d" if self._pad_step_number else "%s-%d") % (save_path,
                                                                             global_step)
    else:
      checkpoint_file = save_path
      if os.path.basename(save_path) == latest_filename and not self._sharded:
        raise ValueError("'latest_filename' collides with 'save_path': '%s' and '%s'" %
                         (latest_filename, save_path))
    save_path_parent = os.path.dirname(save_path)
    if save_path_parent and not os.path.isdir(save_path_parent):
      raise ValueError("Parent directory of {} doesn't exist, can't save.".format(save_path))
    if self._is_empty:
      return None
    if sess is None or not hasattr(sess, "run"):
      raise TypeError("'sess' must be a Session; %s" % sess)
    distributed = getattr(sess, "_distributed", None)
    if distributed is not None:
      # A cluster checkpoint: every ps task writes its part, the chief merges
      # them into SAVE_PATH-STEP and updates the `checkpoint` file, keeping
      # max_to_keep (recflow/distributed/cluster_checkpoint.h).
      step = global_step if global_step is not None else distributed.global_step()
      path = distributed.save(save_path_parent or ".", os.path.basename(save_path),
                              self.saver_def.max_to_keep, step)
      if write_meta_graph:
        self.export_meta_graph(checkpoint_management_meta(path, meta_graph_suffix))
      return path
    model_checkpoint_path = sess.run(self.saver_def.save_tensor_name,
                                     {self.saver_def.filename_tensor_name: checkpoint_file})
    if hasattr(model_checkpoint_path, "item"):  # a NumPy scalar or 0-d array
      model_checkpoint_path = model_checkpoint_path.item()
    if isinstance(model_checkpoint_path, bytes):
      model_checkpoint_path = model_checkpoint_path.decode("utf-8")
    else:
      model_checkpoint_path = str(model_checkpoint_path)
    if write_state:
      self._record_last_checkpoint(model_checkpoint_path)
      checkpoint_management.update_checkpoint_state(
          save_dir=save_path_parent or ".", model_checkpoint_path=model_checkpoint_path,
          all_model_checkpoint_paths=self.last_checkpoints, latest_filename=latest_filename,
          save_relative_paths=self._save_relative_paths)
      self._maybe_delete_old_checkpoints(meta_graph_suffix=meta_graph_suffix)
    if write_meta_graph:
      self.export_meta_graph(checkpoint_management_meta(checkpoint_file, meta_graph_suffix))
    return model_checkpoint_path

  def export_meta_graph(self, filename=None, collection_list=None, as_text=False,
                        export_scope=None, clear_devices=False, clear_extraneous_savers=False,
                        strip_default_attrs=False, save_debug_info=False):
    """Writes a MetaGraphDef with the GraphDef and this SaverDef (no collections)."""
    if as_text:
      raise NotImplementedError("export_meta_graph(as_text=True) is not supported by recflow")
    data = _meta_graph_bytes(self._graph or ops.get_default_graph(), self.saver_def)
    if filename:
      with open(filename, "wb") as f:
        f.write(data)
    return data

  def restore(self, sess, save_path):
    """Restores the variables from the checkpoint prefix save_path. A variable
    missing from the checkpoint raises NotFoundError naming it."""
    if self._is_empty:
      return
    if save_path is None:
      raise ValueError("Can't load save_path when it is None.")
    if not checkpoint_management.checkpoint_exists(save_path):
      raise ValueError("The passed save_path is not a valid checkpoint: " + str(save_path))
    _logger.info("Restoring parameters from %s", save_path)
    distributed = getattr(sess, "_distributed", None)
    if distributed is not None:
      # The chief starts the cluster from the checkpoint (each ps task reads
      # its share; a ps task already initialized, a live cluster, is left as
      # it is); other workers wait for the chief.
      distributed.restore(save_path)
      return
    restore_op = self.saver_def.restore_op_name
    if self._legacy_parts_restore_op is not None and self._has_legacy_parts(save_path):
      restore_op = self._legacy_parts_restore_op
    try:
      sess.run(restore_op, {self.saver_def.filename_tensor_name: save_path})
    except errors.NotFoundError as err:
      raise errors.NotFoundError(
          None, None,
          "Restoring from checkpoint failed. This is most likely due to a Variable name or "
          "other graph key that is missing from the checkpoint. Please ensure that you have "
          "not altered the graph expected based on the checkpoint. Original error:\n\n" +
          err.message)
    except errors.InvalidArgumentError as err:
      raise errors.InvalidArgumentError(
          None, None,
          "Restoring from checkpoint failed. This is most likely due to a mismatch between "
          "the current graph and the graph from the checkpoint. Please ensure that you have "
          "not altered the graph expected based on the checkpoint. Original error:\n\n" +
          err.message)


  def _has_legacy_parts(self, save_path):
    """Whether save_path holds the partitioned variables as "<name>/part_<i>"
    entries (recflow's layout before sliced entries) rather than sliced."""
    try:
      reader = py_checkpoint_reader.CheckpointReader(save_path)
    except errors.OpError:
      return False  # the restore op reports it
    return any(not reader.has_tensor(n) and reader.has_tensor(n + "/part_0")
               for n in self._sliced_names)


def checkpoint_management_meta(checkpoint_file, meta_graph_suffix="meta"):
  basename = checkpoint_file
  if os.path.basename(basename).split("-")[-1].startswith("?????"):
    basename = basename.rsplit("-", 1)[0]
  return basename + "." + meta_graph_suffix
