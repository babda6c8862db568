# recflow's entry points. `make demo` and `make test` work on a fresh
# Debian 12 machine: they install what is missing, build, then run.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CTEST_TIMEOUT ?= 600

.PHONY: all deps build test test-all demo bench clean format check-layers install-python \
        fuzz test-asan test-ubsan test-tsan chaos

all: build

deps:
	@scripts/install-deps.sh

$(BUILD_DIR)/build.ninja:
	cmake -G Ninja -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# Fast tests only; slow ones carry the ctest label "slow".
test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -LE slow --timeout $(CTEST_TIMEOUT)

test-all: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) --timeout $(CTEST_TIMEOUT)

# Reliability (docs/fuzzing.md). `make test` already replays every fuzz
# corpus; these build with clang or a sanitizer in folders of their own.
FUZZ_SECONDS ?= 60
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh $(FUZZ_TARGETS)

test-asan:
	scripts/sanitize.sh address

test-ubsan:
	scripts/sanitize.sh undefined

test-tsan:
	scripts/sanitize.sh thread

# The tests labelled "chaos" (kills, damaged checkpoints, full disks, faults
# under load), CHAOS_ROUNDS times each: every round draws new kill moments.
CHAOS_ROUNDS ?= 3
chaos: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L chaos --timeout 900 \
	  --repeat until-fail:$(CHAOS_ROUNDS)

# The quick start: a synthetic click log (made once), DeepFM trained on it,
# test AUC / logloss beside the oracle's, a SavedModel exported.
DEMO_DATA ?= $(BUILD_DIR)/demo_data_1m
DEMO_MODEL ?= $(BUILD_DIR)/demo_model
demo: build
	@test -f $(DEMO_DATA)/dataset.json || \
	  $(BUILD_DIR)/recflow gen-data --rows 1000000 --test_rows 100000 --seed 1 --out $(DEMO_DATA)
	rm -rf $(DEMO_MODEL)
	$(BUILD_DIR)/recflow train --config examples/configs/deepfm.yaml \
	  --data '$(DEMO_DATA)/train-*.tsv' --eval_data '$(DEMO_DATA)/test-*.tsv' --model_dir $(DEMO_MODEL)
	$(BUILD_DIR)/recflow export --model_dir $(DEMO_MODEL) --export_dir $(DEMO_MODEL)/export/1
	@echo
	@echo "demo: the SavedModel is in $(DEMO_MODEL)/export/1. Inspect and score it with:"
	@echo "  $(BUILD_DIR)/recflow saved_model show --dir $(DEMO_MODEL)/export/1 --all"
	@echo "  $(BUILD_DIR)/recflow saved_model run --dir $(DEMO_MODEL)/export/1 --signature_def serving_default \\"
	@echo "      --input_exprs 'dense=[[0.5,1,2,0,3,1,0,2,1,0,1,0,2]];C1/ids=[7];C1/row_splits=[0,1]' ..."
	@echo "  (every input of the signature must be given). Serve it over TF Serving's REST API:"
	@echo "  $(BUILD_DIR)/recflow serve --rest_api_port=8501 --port=0 --model_name=deepfm --model_base_path=$(abspath $(DEMO_MODEL))/export"
	@echo "  then GET http://127.0.0.1:8501/v1/models/deepfm/metadata (docs/serving_rest.md)"
	@echo "  TensorBoard: tensorboard --logdir $(DEMO_MODEL)"
	@echo
	@echo "demo: recflow from Python, TensorFlow 1.x's API with only the import changed (docs/python.md):"
	@echo "  PYTHONPATH=$(BUILD_DIR)/python /usr/bin/python3 examples/python/quickstart.py"
	@PYTHONPATH=$(BUILD_DIR)/python /usr/bin/python3 examples/python/quickstart.py

# The Python package in a virtual environment, without network: the venv
# sees Debian's NumPy (--system-site-packages); pip builds the wheel with the
# in-tree backend (pyproject.toml), which reuses $(BUILD_DIR).
VENV ?= $(BUILD_DIR)/venv
install-python: build
	/usr/bin/python3 -m venv --system-site-packages $(VENV)
	RECFLOW_BUILD_DIR=$(abspath $(BUILD_DIR)) $(VENV)/bin/pip install --no-build-isolation --no-index --force-reinstall --no-deps .
	cd / && $(VENV)/bin/python -c 'import recflow, recflow.compat.v1 as tf; print("recflow", recflow.__version__, "in", recflow.__file__)'
	@echo "install-python: activate with  . $(VENV)/bin/activate"

bench: build
	@scripts/install-deps.sh --bench
	bench/run all

check-layers:
	../shared/tools/check-layers .

format:
	find recflow examples bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
