# stoke: the two promised commands are `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all bootstrap build demo test test-cpp test-python test-cluster test-interop test-fuzz test-corpus test-tsan test-asan bench clean

all: build

bootstrap:
	@bash scripts/bootstrap.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The demo needs only the stoke binary (and, from bootstrap, the Azurite emulator).
demo: bootstrap $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target stoke
	@bash scripts/demo.sh $(BUILD)/stoke

test: build
	@$(MAKE) --no-print-directory test-cpp test-python test-cluster test-interop test-fuzz test-corpus test-tsan check-threads

test-cpp:
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-python:
	STOKE_BIN=$(abspath $(BUILD))/stoke /usr/bin/python3 -m pytest -q python/tests

# Multi-node checks on a cluster of network namespaces the tests make (tests/cluster/cluster.py);
# where this machine cannot make them (not root, no `ip`), pytest prints why it skipped them (-rs).
test-cluster:
	STOKE_BIN=$(abspath $(BUILD))/stoke /usr/bin/python3 -m pytest -q -rs tests/cluster

test-interop:
	STOKE_BIN=$(abspath $(BUILD))/stoke node --test tests/interop/

# Builds the libFuzzer targets with clang and runs each for a short smoke run.
test-fuzz: bootstrap
	@bash scripts/fuzz.sh $(BUILD)-fuzz 20

# The bad-input corpus (python/tests/test_bad_inputs.py: every command over malformed inputs) against
# the `stoke` command built with ASan + UBSan in the fuzz build (test-fuzz builds it).
test-corpus: test-fuzz
	STOKE_BIN=$(abspath $(BUILD))-fuzz/stoke /usr/bin/python3 -m pytest -q -s python/tests/test_bad_inputs.py

# The multi-threaded layers' suites (core: thread pool, trace recorder; loader: fetcher, pipeline)
# under ThreadSanitizer. CUDA stays off: its runtime is not instrumented. -O1 with line tables only:
# reports keep file:line, and the build takes half the time of -O2 -g.
test-tsan: bootstrap
	cmake -S . -B $(BUILD)-tsan -G Ninja -DSTOKE_SANITIZE=thread -DSTOKE_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
	cmake --build $(BUILD)-tsan -j $(JOBS) --target stoke_core_test stoke_loader_test
	TSAN_OPTIONS=halt_on_error=1 $(BUILD)-tsan/stoke_core_test --gtest_brief=1
	TSAN_OPTIONS=halt_on_error=1 $(BUILD)-tsan/stoke_loader_test --gtest_brief=1

# Clang's thread-safety analysis (-Wthread-safety as an error, -fsyntax-only) over every non-test
# source, after a self-check that a deliberate violation fails; flags from a configure-only clang build dir.
.PHONY: check-threads
check-threads:
	@bash scripts/check_threads.sh $(BUILD)-threads

# The C++ suites under AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan: bootstrap
	cmake -S . -B $(BUILD)-asan -G Ninja -DSTOKE_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j $(JOBS)

bench: build
	@bash bench/write_vs_dd.sh $(BUILD)/stoke
	@bash bench/table_open.sh $(BUILD)/stoke
	@bash bench/commit_cost.sh $(BUILD)/stoke
	@bash bench/deletion_vectors.sh $(BUILD)/stoke
	@bash bench/load_vs_baselines.sh $(BUILD)/stoke
	@bash bench/sample_sizes.sh $(BUILD)/stoke
	@bash bench/codec_cost.sh $(BUILD)/stoke
	@bash bench/blob_storage.sh $(BUILD)/stoke
	@bash bench/cached_epochs.sh $(BUILD)/stoke
	@# Two nodes against one on the namespace test cluster (root only; skipped with a message elsewhere):
	@/usr/bin/python3 bench/cluster_scaling.py --stoke $(BUILD)/stoke
	@BENCH_NODE_MBPS=8 /usr/bin/python3 bench/cluster_scaling.py --stoke $(BUILD)/stoke
	@bash bench/optimize_blob.sh $(BUILD)/stoke
	@bash bench/scale.sh $(BUILD)/stoke
	@bash bench/loader_open.sh $(BUILD)/stoke
	@node bench/foreign_file.mjs $(BUILD)/stoke
	@bash bench/parquet_in_place.sh $(BUILD)/stoke
	@node bench/hf_images.mjs $(BUILD)/stoke
	@bash bench/python_overhead.sh $(BUILD)/stoke
	@bash bench/train_volumes.sh $(BUILD)/stoke
	@bash bench/gpu_feed.sh $(BUILD)/stoke
	@bash bench/images.sh $(BUILD)/stoke
	@# The published experiments at their default scale (docs/experiments.md), reports in $(BUILD)/experiments:
	@# deepiq about 10 min, shuffle about 16-19 min, batch about 12 min on 2 cores.
	@for e in deepiq shuffle batch; do \
	  PYTHONPATH=$(abspath $(BUILD))/python STOKE_SOURCE_DIR=$(CURDIR) /usr/bin/python3 -m stoke.experiments $$e \
	    --out $(BUILD)/experiments || exit 1; done

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz $(BUILD)-tsan $(BUILD)-threads
