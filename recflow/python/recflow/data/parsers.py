"""recflow's text parsers as graph ops: batches of lines -> dicts of tensors.

  import recflow.compat.v1 as tf
  import recflow.data

  lines = tf.placeholder(tf.string, [None])        # or a tf.data element
  batch = recflow.data.parse_criteo(lines)
  batch["labels"]        # float32 [B]
  batch["dense"]         # float32 [B, 13]
  batch["C1"]            # SparseTensor of int64 ids, dense_shape [B, longest row]
  batch["C1/row_splits"] # int64 [B + 1]: row b holds ids[splits[b]:splits[b+1]]

The parsing is recflow's C++ (recflow/data/text_parsers.h; the formats, the id
schemes and the bad-line rules are in docs/formats/text.md): one pass over the
bytes per batch, no Python per line. Each sparse feature comes both as a
SparseTensor (for tf.nn.embedding_lookup_sparse / safe_embedding_lookup_sparse)
and as row splits over the same ids (for tf.embedding_bag and recflow's zoo).

In a tf.data pipeline, whose elements hold plain tensors, parse with
sparse_tensors=False and rebuild the SparseTensors after get_next:

  ds = tf.data.TextLineDataset(files).batch(4096).map(
      lambda lines: recflow.data.parse_criteo(lines, sparse_tensors=False)).prefetch(2)
  batch = recflow.data.to_sparse_tensors(ds.make_one_shot_iterator().get_next())

Bad lines: error_mode="skip" (the default, as in recflow's pipelines) drops
them (the batch has fewer rows; "num_skipped" counts the lines of this batch
that are not in the output, and the op logs a warning with the first bad
line once); error_mode="fail" raises InvalidArgumentError at run time naming
the line ("path:LINE" when `origins` is given, else its row in the batch),
the field and the reason.
"""

import collections

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import sparse_tensor
from recflow.ops import gen_ops as gen

_MAX_LINE_BYTES = 1 << 20
_RESERVED = ("labels", "dense", "num_skipped")


def _inputs(lines, origins):
  lines = ops.convert_to_tensor(lines, dtype=dtypes.string, name="lines")
  if origins is None:
    origins = ops.convert_to_tensor([], dtype=dtypes.string, name="origins")
  else:
    origins = ops.convert_to_tensor(origins, dtype=dtypes.string, name="origins")
  return lines, origins


def _check_error_mode(error_mode):
  if error_mode not in ("skip", "fail"):
    raise ValueError("error_mode must be 'skip' or 'fail', got %r" % (error_mode,))


def _sparse_dict(names, indices, ids, shapes, row_splits, sparse_tensors):
  out = {}
  for name, ix, v, shape, splits in zip(names, indices, ids, shapes, row_splits):
    if sparse_tensors:
      out[name] = sparse_tensor.SparseTensor(ix, v, shape)
    else:
      out[name + "/indices"] = ix
      out[name + "/values"] = v
      out[name + "/dense_shape"] = shape
    out[name + "/row_splits"] = splits
  return out


def to_sparse_tensors(features):
  """The dict of a parser called with sparse_tensors=False (e.g. an element
  of a tf.data pipeline, whose components are plain tensors) in the
  sparse_tensors=True form: each "<name>/indices", "<name>/values",
  "<name>/dense_shape" triple becomes the SparseTensor "<name>" (and a
  "<name>/weights" values tensor the SparseTensor "<name>/weights" with the
  same indices). Other keys are kept."""
  out = dict(features)
  for key in features:
    if not key.endswith("/indices"):
      continue
    base = key[:-len("/indices")]
    try:
      values = out.pop(base + "/values")
      shape = out.pop(base + "/dense_shape")
    except KeyError:
      raise ValueError("to_sparse_tensors: %r has no matching %r and %r" %
                       (key, base + "/values", base + "/dense_shape"))
    indices = out.pop(key)
    out[base] = sparse_tensor.SparseTensor(indices, values, shape)
    if base + "/weights" in out:
      out[base + "/weights"] = sparse_tensor.SparseTensor(indices, out[base + "/weights"], shape)
  return out


def parse_criteo(lines, num_dense=13, num_categorical=26, log_transform=True,
                 dense_default=0.0, id_mode="hex", sequence_fields=(),
                 max_sequence_length=1024, error_mode="skip",
                 max_line_bytes=_MAX_LINE_BYTES, origins=None, sparse_tensors=True, name=None):
  """Parses Criteo TSV lines (label, I1..I<num_dense>, C1..C<num_categorical>
  [, H1..Hk]) with recflow's Criteo parser (op RecflowParseCriteo).

  Args:
    lines: string vector [B] (a scalar is a batch of one).
    num_dense, num_categorical: the column counts (13 and 26 for Criteo).
    log_transform: dense value log(1 + max(x, 0)) (DLRM's preprocessing).
    dense_default: the value of a missing dense field (not transformed).
    id_mode: "hex": C field k's id is (k << 32) | hex value (ids never
      collide across fields); "hash": Fingerprint64 of the field's bytes.
    sequence_fields: one entry per behaviour-sequence column H1..Hk after the
      C fields: the 0-based categorical field whose id space it shares.
    max_sequence_length: items per sequence (longer is a bad line).
    error_mode: "skip" or "fail" (module doc).
    max_line_bytes: longer lines are bad.
    origins: None or a string vector like `lines` of "path:LINE" names, used
      only in error messages.
    sparse_tensors: False gives each sparse feature as plain tensors
      "<name>/indices", "<name>/values", "<name>/dense_shape" instead of the
      SparseTensor "<name>" (for a tf.data map, whose elements hold plain
      tensors; to_sparse_tensors rebuilds the SparseTensors after get_next).
  Returns:
    dict: "labels" float32 [B'], "dense" float32 [B', num_dense], per sparse
    feature "C1".."C<n>" then "H1".."H<k>" an int64 SparseTensor [B', longest
    row] and "<name>/row_splits" int64 [B' + 1], "num_skipped" int64 scalar.
  """
  _check_error_mode(error_mode)
  sequence_fields = [int(f) for f in sequence_fields]
  num_sparse = int(num_categorical) + len(sequence_fields)
  with ops.name_scope(name, "ParseCriteo", [lines]):
    lines, origins = _inputs(lines, origins)
    out = gen.recflow_parse_criteo(
        lines, origins, num_dense=num_dense, num_categorical=num_categorical,
        num_sparse=num_sparse, log_transform=log_transform, dense_default=dense_default,
        id_mode=id_mode, sequence_fields=sequence_fields,
        max_sequence_length=max_sequence_length, error_mode=error_mode,
        max_line_bytes=max_line_bytes)
  names = (["C%d" % (i + 1) for i in range(num_categorical)] +
           ["H%d" % (i + 1) for i in range(len(sequence_fields))])
  result = {"labels": out.labels, "dense": out.dense, "num_skipped": out.num_skipped}
  result.update(_sparse_dict(names, out.sparse_indices, out.sparse_ids, out.sparse_shapes,
                             out.sparse_row_splits, sparse_tensors))
  return result


def parse_libsvm(lines, feature_name="features", binary_labels=True, error_mode="skip",
                 max_line_bytes=_MAX_LINE_BYTES, origins=None, sparse_tensors=True, name=None):
  """Parses libsvm lines ("label idx:val idx:val ... [# comment]") with
  recflow's libsvm parser (op RecflowParseLibsvm).

  binary_labels: 1/+1 -> 1, 0/-1 -> 0, anything else is a bad line; False
  keeps any finite label. Other arguments as parse_criteo's.
  Returns:
    dict: "labels" float32 [B'], feature_name: int64 SparseTensor of the idx
    values [B', longest row], feature_name + "/weights": float32 SparseTensor
    of the val values with the same indices (sp_weights of
    embedding_lookup_sparse), feature_name + "/row_splits" int64 [B' + 1],
    "num_skipped" int64 scalar. With sparse_tensors=False, feature_name's
    SparseTensor is given as "/indices", "/values", "/dense_shape" tensors
    and feature_name + "/weights" is the float32 values tensor [nnz].
  """
  _check_error_mode(error_mode)
  if not feature_name or feature_name in _RESERVED:
    raise ValueError("feature_name must be non-empty and not one of %s, got %r" %
                     (", ".join(_RESERVED), feature_name))
  with ops.name_scope(name, "ParseLibsvm", [lines]):
    lines, origins = _inputs(lines, origins)
    out = gen.recflow_parse_libsvm(lines, origins, binary_labels=binary_labels,
                                   error_mode=error_mode, max_line_bytes=max_line_bytes)
  result = {"labels": out.labels, "num_skipped": out.num_skipped,
            feature_name + "/weights": out.weights}
  result.update(_sparse_dict([feature_name], [out.indices], [out.ids], [out.dense_shape],
                             [out.row_splits], sparse_tensors=False))
  return to_sparse_tensors(result) if sparse_tensors else result


class CsvColumn(collections.namedtuple(
    "CsvColumn", ["name", "kind", "id_type", "multi_value_separator", "default_value"])):
  """One column of a CSV schema for parse_csv.

  kind: "label" (at most one; a finite number), "dense" (a number; empty gives
  default_value), "sparse" (a bag of ids: id_type "string" hashes each value
  with Fingerprint64, "int64" takes the written integer; with a
  multi_value_separator character a field holds several values) or "ignore".
  """

  def __new__(cls, name, kind="dense", id_type="string", multi_value_separator="",
              default_value=0.0):
    return super(CsvColumn, cls).__new__(cls, name, kind, id_type, multi_value_separator,
                                         default_value)


def _as_column(c):
  if isinstance(c, CsvColumn):
    return c
  if isinstance(c, str):
    return CsvColumn(c)
  if isinstance(c, dict):
    return CsvColumn(**c)
  if isinstance(c, (tuple, list)):
    return CsvColumn(*c)
  raise TypeError("a CSV column is a CsvColumn, a name, a dict or a tuple, got %r" % (c,))


def parse_csv(lines, columns, delimiter=",", has_header=False, quoting=True,
              trim_whitespace=True, error_mode="skip", max_line_bytes=_MAX_LINE_BYTES,
              origins=None, sparse_tensors=True, name=None):
  """Parses CSV lines with a declared schema with recflow's CSV parser (op
  RecflowParseCsv): every line has exactly len(columns) fields.

  Args:
    columns: CsvColumn (or name / dict / tuple of CsvColumn's fields) per
      column, in order.
    delimiter: one character. has_header: drop a header line (the first line
      of a file when origins are given, else a line equal to the column
      names). quoting: '"' quotes fields. trim_whitespace: spaces and tabs
      around fields are ignored. Other arguments as parse_criteo's.
  Returns:
    dict: "labels" float32 [B'] (zeros without a label column), "dense"
    float32 [B', number of dense columns] (in column order), per sparse
    column its name: an int64 SparseTensor [B', longest row] and
    name + "/row_splits" int64 [B' + 1], "num_skipped" int64 scalar.
  """
  _check_error_mode(error_mode)
  columns = [_as_column(c) for c in columns]
  if not columns:
    raise ValueError("parse_csv needs at least one column")
  for c in columns:
    if c.kind == "sparse" and (c.name in _RESERVED or "/" in c.name):
      raise ValueError("sparse column name %r is reserved in parse_csv's result" % c.name)
  sparse_names = [c.name for c in columns if c.kind == "sparse"]
  with ops.name_scope(name, "ParseCsv", [lines]):
    lines, origins = _inputs(lines, origins)
    out = gen.recflow_parse_csv(
        lines, origins, column_names=[c.name for c in columns],
        column_kinds=[c.kind for c in columns], id_types=[c.id_type for c in columns],
        multi_value_separators=[c.multi_value_separator for c in columns],
        dense_defaults=[float(c.default_value) for c in columns],
        num_sparse=len(sparse_names), delimiter=delimiter, has_header=has_header,
        quoting=quoting, trim_whitespace=trim_whitespace, error_mode=error_mode,
        max_line_bytes=max_line_bytes)
  result = {"labels": out.labels, "dense": out.dense, "num_skipped": out.num_skipped}
  result.update(_sparse_dict(sparse_names, out.sparse_indices, out.sparse_ids,
                             out.sparse_shapes, out.sparse_row_splits, sparse_tensors))
  return result
