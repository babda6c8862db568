# Sourced by the shell tests after RECFLOW, SRC and TMP are set. Finds TF
# Serving's half_plus_two as TensorFlow wrote it (under $RECFLOW_TESTDATA,
# default $SRC/../shared/testdata); in a clone without it, writes recflow's
# stand-in (checkpoint/testing/half_plus_two.h: the same signatures,
# node names and answers), which every check of these scripts accepts.
#   HPT        the model directory to use
TESTDATA=${RECFLOW_TESTDATA:-$SRC/../shared/testdata}
HPT=$TESTDATA/tf_serving/saved_model_half_plus_two_cpu/00000123
if [[ ! -d $HPT ]]; then
  HPT=$TMP/half_plus_two_stand_in
  if ! "$(dirname "$RECFLOW")/write_testdata" half_plus_two "$HPT"; then
    echo "FAIL: cannot write the half_plus_two stand-in with $(dirname "$RECFLOW")/write_testdata"
    exit 1
  fi
  echo "note: TensorFlow-written fixtures absent from $TESTDATA (set RECFLOW_TESTDATA);" \
    "using recflow's half_plus_two stand-in"
fi
