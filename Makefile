# A thin front end over CMake and ctest. Every target installs what is missing first
# (scripts/deps.sh: a no-op when all is there). Build directories are configured once;
# afterwards cmake re-runs by itself when a CMakeLists.txt changes.
#
#   make / make build   build into build/, and the web console into console/dist
#                       (scripts/console-deps.sh: npm ci when the lock file changed, vite
#                       build when a source did; cellad serves it at /console/)
#   make console        the web console alone
#   make image          the default sandbox image into $(IMAGES) (mmdebstrap, once)
#   make run            build, image, then run cellad on $(LISTEN)
#   make sdk            the TypeScript SDK: npm ci (when the lock file changed), tsc into
#                       sdk/typescript/dist and build-test (scripts/sdk-deps.sh)
#   make test           unit + integration (the SDK's node:test suites included) +
#                       fuzz-corpus replay in build/, then the ASan+UBSan pass in
#                       build-asan/ (make test-asan alone)
#   make fuzz           libFuzzer (clang) in build-fuzz/, FUZZ_SECONDS (600) per target;
#                       what adds coverage joins tests/fuzz/corpus/ (FUZZ_GROW=0: not)
#   make bench          the benchmarks (bench/run.sh, preview.sh, pty.sh, sdk.sh, sdk-python.sh,
#                       output.sh, files.sh, images.sh, snapshots.sh, memsleep.sh, backups.sh,
#                       cluster.sh, cluster-failover.sh, density.sh)
#   make format         clang-format every C file
#   make clean          remove the build directories
SHELL := /bin/bash

BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
IMAGES ?= /var/lib/cella/images
LISTEN ?= 127.0.0.1:7070
CELLAD_ARGS ?=
FUZZ_SECONDS ?= 600
FUZZ_GROW ?= 1
FUZZ_TARGETS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Tests run one at a time by default: integration tests own real daemons and sandboxes.
CTEST_JOBS ?= 1
CTEST_ARGS ?=
ASAN_LABELS ?= unit|fuzz|asan

export ASAN_OPTIONS ?= detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export DEBIAN_FRONTEND := noninteractive

.PHONY: all build deps image sdk console run test test-unit test-asan build-asan fuzz bench format clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(ASAN_BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCELLA_SANITIZE=ON

$(FUZZ_BUILD)/CMakeCache.txt: | deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCELLA_FUZZ=ON

build: deps $(BUILD)/CMakeCache.txt console
	cmake --build $(BUILD) -j $(JOBS)

console: deps
	@scripts/console-deps.sh

image: deps
	scripts/build-image.sh $(IMAGES) default

sdk: deps
	@scripts/sdk-deps.sh

run: build image
	exec $(BUILD)/cellad --listen $(LISTEN) --images $(IMAGES) $(CELLAD_ARGS)

# Both passes run even if the first fails, so one run reports everything; the exit status
# is non-zero if either failed.
test: build image sdk
	@rc=0; \
	echo "=== ctest $(BUILD): unit, integration, fuzz corpus replay"; \
	tests/helpers/reap-leftovers.sh; \
	ctest --test-dir $(BUILD) --output-on-failure -j $(CTEST_JOBS) $(CTEST_ARGS) || rc=1; \
	echo "=== ASan+UBSan pass"; \
	$(MAKE) --no-print-directory test-asan || rc=1; \
	if [ $$rc -ne 0 ]; then echo "make test: FAILED"; else echo "make test: all passed"; fi; \
	exit $$rc

test-unit: build
	tests/helpers/reap-leftovers.sh
	ctest --test-dir $(BUILD) --output-on-failure -j $(CTEST_JOBS) -L 'unit|fuzz' $(CTEST_ARGS)

build-asan: deps $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)

test-asan: build-asan image
	tests/helpers/reap-leftovers.sh
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(CTEST_JOBS) \
		-L '$(ASAN_LABELS)' $(CTEST_ARGS)

fuzz: deps $(FUZZ_BUILD)/CMakeCache.txt
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_GROW=$(FUZZ_GROW) scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_TARGETS)

# Prints p50/p95 beside the baselines measured in the same run and rewrites the figures
# section of docs/performance.md.
bench: build image
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/run.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/preview.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/pty.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/sdk.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/sdk-python.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/output.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/files.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/images.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/snapshots.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/memsleep.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/backups.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/cluster.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/cluster-failover.sh
	env BUILD=$(abspath $(BUILD)) IMAGES=$(IMAGES) bench/density.sh

format:
	git ls-files -z -- '*.c' '*.h' | xargs -0 -r clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
