# recflow's entry points. `make demo` and `make test` work on a fresh
# Debian 12 machine: they install what is missing, build, then run.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CTEST_TIMEOUT ?= 600

.PHONY: all deps build test test-all demo bench clean format check-layers

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

demo: build
	$(BUILD_DIR)/recflow gen-data --rows 200000 --test_rows 50000 --seed 1 --out $(BUILD_DIR)/demo_data
	@echo "demo: synthetic click logs in $(BUILD_DIR)/demo_data (the oracle AUC/logloss are in dataset.json)"
	$(BUILD_DIR)/recflow demo

bench: build
	@scripts/install-deps.sh --bench
	bench/run all

check-layers:
	../shared/tools/check-layers .

format:
	find recflow examples bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
