#!/usr/bin/env bash
# End-to-end tests of the recflow command: good inputs give the expected
# output, bad inputs (missing, truncated, corrupt, wrong kind) give a clear
# error and a non-zero exit, never a crash.
set -u
RECFLOW=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
HPT=$SRC/../shared/testdata/tf_serving/saved_model_half_plus_two_cpu/00000123
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

echo "$pass passed, $fails failed"
((fails == 0))
