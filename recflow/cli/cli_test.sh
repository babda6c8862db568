#!/usr/bin/env bash
# End-to-end tests of the recflow command: good inputs give the expected
# output, bad inputs (missing, truncated, corrupt, wrong kind) give a clear
# error and a non-zero exit, never a crash.
set -u
RECFLOW=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/testdata.sh"
fails=0
pass=0

# expect NAME EXIT_CODE REGEX CMD...
expect() {
  local name=$1 want_rc=$2 regex=$3
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc ]] || ! grep -qE -- "$regex" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $want_rc), output did not match /$regex/:"
    echo "$out" | head -20
    fails=$((fails + 1))
  else
    pass=$((pass + 1))
  fi
}

expect inspect_saved_model_dir 0 "serving_default \(tensorflow/serving/predict\)" \
  "$RECFLOW" graph inspect "$HPT"
expect inspect_summary 0 "ParseExample +1" \
  "$RECFLOW" graph inspect "$HPT/saved_model.pb" --summary_only
expect inspect_node_attrs 0 "value = Tensor<float \[\]: \[0.5\]>" \
  "$RECFLOW" graph inspect "$HPT/saved_model.pb"
expect inspect_bad_tag 1 "no meta graph tagged 'train'" \
  "$RECFLOW" graph inspect "$HPT" --tag=train
expect demo 0 "reproduces the scores exactly" \
  "$RECFLOW" demo --steps=20 --batch=32 --export="$TMP/mlp.pbtxt"
expect inspect_text_graph 0 "hidden/MatMul = MatMul" "$RECFLOW" graph inspect "$TMP/mlp.pbtxt"

head -c 1000 "$HPT/saved_model.pb" > "$TMP/saved_model.pb"
expect truncated_saved_model 1 "not a valid SavedModel" "$RECFLOW" graph inspect "$TMP/saved_model.pb"
head -c 4000 /dev/urandom > "$TMP/garbage.pb"
expect garbage_graph 1 "parses neither as a binary nor as a text GraphDef" \
  "$RECFLOW" graph inspect "$TMP/garbage.pb"
expect missing_file 1 "nope.pb" "$RECFLOW" graph inspect "$TMP/nope.pb"
mkdir "$TMP/empty"
expect dir_without_model 1 "has no saved_model.pb" "$RECFLOW" graph inspect "$TMP/empty"
printf 'node { name: "y" op: "Identity" input: "x" attr { key: "T" value { type: DT_FLOAT } } }\n' > "$TMP/dangling.pbtxt"
expect dangling_input 1 "refers to node 'x', which is not in the graph" \
  "$RECFLOW" graph inspect "$TMP/dangling.pbtxt"
expect unknown_command 2 "unknown command 'frobnicate'" "$RECFLOW" frobnicate
expect unknown_flag 2 "unknown flag --bogus" "$RECFLOW" graph inspect "$HPT" --bogus
expect missing_library 1 "cannot load op library '/nonexistent.so'" \
  "$RECFLOW" --load_op_library=/nonexistent.so ops list
expect ops_show 0 "attr +transpose_a: bool = false" "$RECFLOW" ops show MatMul
expect ops_show_unknown 1 "op type not registered: 'MatMull'" "$RECFLOW" ops show MatMull

# gen-data: the synthetic dataset (docs/data.md).
expect gen_data 0 "wrote 2000 train rows \(2 files\) and 300 test rows" \
  "$RECFLOW" gen-data --rows 2000 --test_rows 300 --seed 5 --num_files 2 --threads 1 --out "$TMP/gd1"
expect gen_data_two_threads 0 "ground truth on test: AUC 0\.[6-9]" \
  "$RECFLOW" gen-data --rows=2000 --test_rows=300 --seed=5 --num_files=2 --threads=2 --out="$TMP/gd2"
expect gen_data_same_bytes 0 "" diff -r "$TMP/gd1" "$TMP/gd2"
expect gen_data_files 0 "^test-00001-of-00002\.tsv$" ls "$TMP/gd1"
expect gen_data_json 0 '"oracle": \{"auc": 0\.[0-9]+, "logloss": 0\.' cat "$TMP/gd1/dataset.json"
expect gen_data_tsv_columns 0 "^all 1000 lines have 40 columns$" \
  awk -F'\t' 'NF != 40 {bad++} END {print bad ? "bad" : "all " NR " lines have 40 columns"}' \
  "$TMP/gd1/train-00000-of-00002.tsv"
"$RECFLOW" gen-data --rows 2000 --test_rows 300 --seed 6 --num_files 2 --out "$TMP/gd3" >/dev/null 2>&1
expect gen_data_other_seed 1 "differ" cmp "$TMP/gd1/train-00000-of-00002.tsv" "$TMP/gd3/train-00000-of-00002.tsv"
expect gen_data_tfrecord 0 "wrote 500 train rows" \
  "$RECFLOW" gen-data --rows 500 --test_rows 50 --format tfrecord --out "$TMP/gdtf"
expect gen_data_missing_out 2 "--out is required" "$RECFLOW" gen-data --rows 10
expect gen_data_missing_rows 2 "--rows is required" "$RECFLOW" gen-data --out "$TMP/x"
expect gen_data_zero_rows 2 "--rows must be a positive integer, got '0'" \
  "$RECFLOW" gen-data --rows 0 --out "$TMP/x"
expect gen_data_bad_format 2 "--format: unknown format 'csv'; choose criteo or tfrecord" \
  "$RECFLOW" gen-data --rows 10 --format csv --out "$TMP/x"
expect gen_data_bad_files 2 "--num_files \(20\) must not exceed --rows \(10\)" \
  "$RECFLOW" gen-data --rows 10 --num_files 20 --out "$TMP/x"
touch "$TMP/plain_file"
expect gen_data_unwritable 1 "--out $TMP/plain_file/sub: cannot create the directory" \
  "$RECFLOW" gen-data --rows 10 --out "$TMP/plain_file/sub"

# ckpt: tensor-bundle checkpoints (more cases in ckpt_command_test.cc).
VARS=$HPT/variables/variables
expect ckpt_inspect_tf 0 "total: 5 tensors, 20 bytes .* 0 bad" "$RECFLOW" ckpt inspect "$VARS"
expect ckpt_inspect_value 0 "values: \[0\.5\]" "$RECFLOW" ckpt inspect "$VARS" --tensor a
expect ckpt_merge_tf 0 "wrote $TMP/ck/merged: 5 tensors" "$RECFLOW" ckpt merge --out "$TMP/ck/merged" "$VARS"
expect ckpt_diff_same 0 "^equal: 5 tensors equal" "$RECFLOW" ckpt diff "$VARS" "$TMP/ck/merged"
expect ckpt_merge_exists 1 "already exists" "$RECFLOW" ckpt merge --out "$TMP/ck/merged" "$VARS"
expect ckpt_merge_dup 1 "tensor 'a' is in both" "$RECFLOW" ckpt merge --out "$TMP/ck/m2" "$VARS" "$TMP/ck/merged"
expect ckpt_missing 1 "no checkpoint at '$TMP/none'" "$RECFLOW" ckpt inspect "$TMP/none"
head -c 30 "$VARS.index" > "$TMP/ck/trunc.index"
expect ckpt_truncated_index 1 "trunc.index" "$RECFLOW" ckpt inspect "$TMP/ck/trunc"

# saved_model show|run on TensorFlow's half_plus_two (y = 0.5x + 2).
expect sm_show_tags 0 "^'serve'$" "$RECFLOW" saved_model show --dir "$HPT"
expect sm_show_sigs 0 'SignatureDef key: "regress_x_to_y"' \
  "$RECFLOW" saved_model show --dir "$HPT" --tag_set serve
expect sm_show_sig 0 "shape: \(-1, 1\)" \
  "$RECFLOW" saved_model show --dir "$HPT" --tag_set serve --signature_def serving_default
expect sm_show_method 0 "Method name is: tensorflow/serving/classify" \
  "$RECFLOW" saved_model show --dir "$HPT" --tag_set serve --signature_def classify_x_to_y
expect sm_show_all 0 "signature_def\['regress_x2_to_y3'\]" "$RECFLOW" saved_model show --dir "$HPT" --all
expect sm_run_expr 0 "^\[\[2\.5\], \[3\], \[4\.5\]\]$" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --input_exprs 'x=[1.0,2.0,5.0]'
expect sm_run_nested 0 "^\[\[2\.5\], \[3\]\]$" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --input_exprs 'x=[[1], [2]]'
expect sm_run_outdir 0 "Output y is saved to $TMP/sm/y.npy" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default \
  --input_exprs 'x=[1,2,5]' --outdir "$TMP/sm"
expect sm_run_npy_back 0 "^\[\[3\.25\], \[3\.5\], \[4\.25\]\]$" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/y.npy"
# .npy files written here: good (v1 and v2, float64 cast to float), and bad.
python3 - "$TMP/sm" <<'PY'
import struct, sys
d = sys.argv[1]
def npy(name, descr, shape, data, fortran=False, major=1, cut=0):
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False", shape)
    pre = 10 if major == 1 else 12
    h += " " * ((64 - (pre + len(h) + 1) % 64) % 64) + "\n"
    hl = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
    b = b"\x93NUMPY" + bytes([major, 0]) + hl + h.encode() + data
    open(d + "/" + name, "wb").write(b[:len(b) - cut])
npy("f64.npy", "<f8", "(2, 1)", struct.pack("<2d", 4.0, -2.0))
npy("v2.npy", "<f4", "(3,)", struct.pack("<3f", 1, 2, 5), major=2)
npy("fortran.npy", "<f4", "(2, 1)", struct.pack("<2f", 1, 2), fortran=True)
npy("c64.npy", "<c8", "(2,)", struct.pack("<4f", 1, 0, 2, 0))
npy("big.npy", ">f4", "(2,)", struct.pack(">2f", 1, 2))
npy("trunc.npy", "<f4", "(4, 1)", struct.pack("<4f", 1, 2, 3, 4), cut=5)
# Element counts whose byte counts wrap around 2^64, and one past int64.
npy("wrap.npy", "<f4", "(4611686018427387904, 1)", struct.pack("<2f", 1, 2))
npy("wrap1.npy", "<f4", "(4611686018427387905, 1)", b"")
npy("huge.npy", "<f8", "(4294967296, 4294967296)", b"")
open(d + "/magic.npy", "wb").write(b"not a numpy file at all")
PY
expect sm_run_npy_f64 0 "^\[\[4\], \[1\]\]$" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/f64.npy"
expect sm_run_npy_v2 0 "^\[\[2\.5\], \[3\], \[4\.5\]\]$" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/v2.npy"
expect sm_npy_fortran 1 "fortran_order arrays are not supported" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/fortran.npy"
expect sm_npy_dtype 1 "unsupported .npy dtype '<c8'" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/c64.npy"
expect sm_npy_big_endian 1 "unsupported .npy dtype '>f4'" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/big.npy"
expect sm_npy_truncated 1 "trunc.npy': truncated .npy data" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/trunc.npy"
expect sm_npy_wraps 1 "wrap.npy': truncated .npy data: shape \[4611686018427387904,1\] of <f4 needs 4611686018427387904 elements of 4 bytes, file has 8 bytes" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/wrap.npy"
expect sm_npy_wraps_plus_one 1 "wrap1.npy': truncated .npy data" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/wrap1.npy"
expect sm_npy_overflows 1 "huge.npy': bad .npy shape '\(4294967296, 4294967296\)'" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/huge.npy"
expect sm_npy_magic 1 "magic.npy' is not a .npy file" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/magic.npy"
expect sm_npy_missing 1 "nope.npy' does not exist" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/nope.npy"
expect sm_run_regress_examples 0 "^\[\[2\.5\], \[4\]\]$" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def regress_x_to_y \
  --input_examples 'inputs=[{"x": [1.0]}, {"x": 4.0}]'
expect sm_run_classify_examples 0 "Result for output key scores:" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def classify_x_to_y --input_examples 'inputs=[{"x": [3.0]}]'
expect sm_examples_mixed 1 "feature 'x' mixes kinds of values" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def regress_x_to_y --input_examples 'inputs=[{"x": [3.0, "a"]}]'
expect sm_examples_unclosed 1 "expected '\}' at position 12" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def regress_x_to_y --input_examples 'inputs=[{"x": [3.0]'
expect sm_examples_wrong_type 1 "feature 'x': expected float_list, got int64_list" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def regress_x_to_y --input_examples 'inputs=[{"x": [3]}]'
truncate -s 1200M "$TMP/sm/huge.npy"
expect sm_npy_oversized 1 "huge.npy" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --inputs "x=$TMP/sm/huge.npy"
expect sm_missing_dir 1 "SavedModel directory '$TMP/none' does not exist" \
  "$RECFLOW" saved_model show --dir "$TMP/none"
expect sm_no_dir_flag 2 "--dir is required" "$RECFLOW" saved_model show
expect sm_bad_tag_set 1 "no MetaGraph with tag set \{train\}; available tag sets: \{serve\}" \
  "$RECFLOW" saved_model show --dir "$HPT" --tag_set train
expect sm_run_bad_tag_set 1 "available tag sets: \{serve\}" \
  "$RECFLOW" saved_model run --dir "$HPT" --tag_set serve,gpu --signature_def serving_default \
  --input_exprs 'x=[1]'
expect sm_unknown_signature 1 "no signature 'nope'; available signatures: classify_x_to_y" \
  "$RECFLOW" saved_model show --dir "$HPT" --tag_set serve --signature_def nope
expect sm_run_unknown_signature 1 "no signature 'nope'" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def nope --input_exprs 'x=[1]'
expect sm_bad_expr 1 "'1.0x' is not a number" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --input_exprs 'x=[1.0x]'
expect sm_ragged_expr 1 "ragged nested list" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --input_exprs 'x=[[1],[2,3]]'
expect sm_unclosed_expr 1 "expected ',' or '\]'" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --input_exprs 'x=[1,2'
expect sm_no_equals 1 "expected KEY=VALUE, got 'x'" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --input_exprs 'x'
expect sm_unknown_input 1 "has no input 'z'; its inputs are: x" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --input_exprs 'z=[1]'
expect sm_string_input 1 "input 'inputs' is string but the value is a number" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def classify_x_to_y --input_exprs 'inputs=[1]'
expect sm_bad_shape 1 "input 'x' must have shape \[\?,1\]" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def serving_default --input_exprs 'x=[[1,2]]'
# saved_model run takes every dtype saved_model_cli feeds (strings quoted as
# Python writes them, b"\x.." bytes included) and runs a signature without
# inputs; the model is a saved_model.pbtxt (text format) written here.
mkdir -p "$TMP/sm/dtypes"
cat > "$TMP/sm/dtypes/saved_model.pbtxt" <<'PBTXT'
saved_model_schema_version: 1
meta_graphs {
  meta_info_def { tags: "serve" }
  graph_def {
    node { name: "u" op: "Placeholder" attr { key: "dtype" value { type: DT_UINT8 } } }
    node { name: "u_out" op: "Identity" input: "u" attr { key: "T" value { type: DT_UINT8 } } }
    node { name: "i" op: "Placeholder" attr { key: "dtype" value { type: DT_INT8 } } }
    node { name: "i_out" op: "Identity" input: "i" attr { key: "T" value { type: DT_INT8 } } }
    node { name: "s" op: "Placeholder" attr { key: "dtype" value { type: DT_STRING } } }
    node { name: "s_out" op: "Identity" input: "s" attr { key: "T" value { type: DT_STRING } } }
    node { name: "c" op: "Const"
      attr { key: "dtype" value { type: DT_INT32 } }
      attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } int_val: 7 int_val: 8 } } } }
  }
  signature_def { key: "u8" value {
    inputs { key: "u" value { name: "u:0" dtype: DT_UINT8 tensor_shape { dim { size: -1 } } } }
    outputs { key: "out" value { name: "u_out:0" dtype: DT_UINT8 tensor_shape { dim { size: -1 } } } }
    method_name: "tensorflow/serving/predict" } }
  signature_def { key: "i8" value {
    inputs { key: "i" value { name: "i:0" dtype: DT_INT8 tensor_shape { dim { size: -1 } } } }
    outputs { key: "out" value { name: "i_out:0" dtype: DT_INT8 tensor_shape { dim { size: -1 } } } }
    method_name: "tensorflow/serving/predict" } }
  signature_def { key: "str" value {
    inputs { key: "s" value { name: "s:0" dtype: DT_STRING tensor_shape { dim { size: -1 } } } }
    outputs { key: "out" value { name: "s_out:0" dtype: DT_STRING tensor_shape { dim { size: -1 } } } }
    method_name: "tensorflow/serving/predict" } }
  signature_def { key: "const" value {
    outputs { key: "c" value { name: "c:0" dtype: DT_INT32 tensor_shape { dim { size: 2 } } } }
    method_name: "tensorflow/serving/predict" } }
}
PBTXT
DT="$TMP/sm/dtypes"
expect sm_run_uint8 0 "^\[0, 255, 7\]$" \
  "$RECFLOW" saved_model run --dir "$DT" --signature_def u8 --input_exprs 'u=[0, 255, 7]'
expect sm_run_uint8_range 1 "input 'u' is uint8 but value 256 is not an integer in range" \
  "$RECFLOW" saved_model run --dir "$DT" --signature_def u8 --input_exprs 'u=[256]'
expect sm_run_int8 0 "^\[-128, 127\]$" \
  "$RECFLOW" saved_model run --dir "$DT" --signature_def i8 --input_exprs 'i=[-128, 127]'
expect sm_run_string 0 '^\[b"a b", b"\\x00\\xff", b"it.{1,2}s"\]$' \
  "$RECFLOW" saved_model run --dir "$DT" --signature_def str --input_exprs "s=[\"a b\", b'\\x00\\xff', 'it\\'s']"
expect sm_run_no_inputs 0 "^\[7, 8\]$" \
  "$RECFLOW" saved_model run --dir "$DT" --signature_def const
expect sm_run_missing_inputs 2 "signature 'u8' has inputs; give them" \
  "$RECFLOW" saved_model run --dir "$DT" --signature_def u8
python3 - "$TMP/sm" <<'PY'
import struct, sys
h = "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }"
h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
open(sys.argv[1] + "/u8.npy", "wb").write(
    b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + bytes([1, 2, 250]))
PY
expect sm_run_uint8_npy 0 "^\[1, 2, 250\]$" \
  "$RECFLOW" saved_model run --dir "$DT" --signature_def u8 --inputs "u=$TMP/sm/u8.npy"
# A serialized tf.Example ({"x": [2.0]}) given as bytes to half_plus_two's
# regress signature.
expect sm_run_example_bytes 0 "^\[\[3\]\]$" \
  "$RECFLOW" saved_model run --dir "$HPT" --signature_def regress_x_to_y \
  --input_exprs 'inputs=[b"\x0a\x0f\x0a\x0d\x0a\x01x\x12\x08\x12\x06\x0a\x04\x00\x00\x00\x40"]'
mkdir -p "$TMP/sm/trunc_model"
head -c 100 "$HPT/saved_model.pb" > "$TMP/sm/trunc_model/saved_model.pb"
expect sm_truncated_model 1 "saved_model.pb' \(100 bytes\) is not a valid SavedModel" \
  "$RECFLOW" saved_model show --dir "$TMP/sm/trunc_model"

# The zoo's two_tower (examples/configs, small tables) trains on the gen-data
# files and exports user_embedding / item_embedding signatures; din's example
# config needs the sequence column H1 that files without --history lack.
sed 's/vocabulary_size: 100000/vocabulary_size: 1000/' "$SRC/examples/configs/two_tower.yaml" \
  > "$TMP/two_tower.yaml"
expect zoo_two_tower_train 0 "trained 2 steps" \
  "$RECFLOW" train --config "$TMP/two_tower.yaml" --data "$TMP/gd1/train-*.tsv" \
  --model_dir "$TMP/tt" --steps 2 --threads 1
expect zoo_two_tower_export 0 "exported .*two_tower" \
  "$RECFLOW" export --model_dir "$TMP/tt" --export_dir "$TMP/tt_export"
expect zoo_two_tower_signatures 0 "signature_def\['user_embedding'\]" \
  "$RECFLOW" saved_model show --dir "$TMP/tt_export" --all
expect zoo_din_needs_sequence 1 "has 40 columns on line 1, but the config's 1 sequence feature\(s\) H1..H1 need 41" \
  "$RECFLOW" train --config "$SRC/examples/configs/din.yaml" --data "$TMP/gd1/train-*.tsv" \
  --model_dir "$TMP/din"

echo "$pass passed, $fails failed"
((fails == 0))
