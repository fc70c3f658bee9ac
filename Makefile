# Thin wrapper over CMake. `make demo` and `make test` are the two set-up commands.
BUILD ?= build
JOBS ?= 2
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=

# A build folder made now uses Ninja where it is installed (scripts/install-deps.sh installs it):
# its rules let a test's files compile while the runtime they link is still compiling, where
# make's rules wait for the whole library first. A folder keeps the generator it was made with.
generator = $(if $(wildcard $(1)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))

.PHONY: all deps configure build demo test test-long sanitize-build test-sanitize test-sanitize-all tsan-build test-tsan test-sanitizers mpi bench bench-mpi ulps cuda clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake $(call generator,$(BUILD)) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target logistic_regression
	XSYM_FLAGS="profile=True,profile_memory=True,profiling.destination=stdout,$${XSYM_FLAGS:-}" $(BUILD)/examples/logistic_regression

# Every test but those labelled long (the graph fuzzer), which test-long runs.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

# The differential test on 50000 random graphs instead of 1000, the graph fuzzer for 10 minutes,
# then every area sanitized.
test-long: build
	@cd $(BUILD) && XSYM_RANDOM_GRAPHS=50000 ctest --output-on-failure -R "^compile$$"
	@cd $(BUILD) && XSYM_FUZZ_SECONDS=600 ctest --output-on-failure -L long
	@$(MAKE) --no-print-directory test-sanitize-all

# Test areas under AddressSanitizer and UndefinedBehaviorSanitizer (float-cast-overflow too),
# in their own build, with this CPU's vector instructions (-march=native: the AVX-512 and AVX2
# kernels a native program runs are the ones sanitized). CI runs the areas that drive every
# kernel, product, reduction, edge value and lock; `make test-sanitize-all` (part of test-long)
# adds the rest (arguments alone takes 9 minutes to build sanitized, beyond CI's budget).
SANITIZE_AREAS ?= oracle edges threads
SANITIZE_ALL_AREAS := $(SANITIZE_AREAS) arguments compile modes config profile expr grad dtypes
empty :=
space := $(empty) $(empty)
SANITIZE_FLAGS := -O0 -g1 -march=native -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow -fno-omit-frame-pointer \
  -include $(CURDIR)/tests/support/o0_avx512bw.hpp
# tests/support/o0_avx512bw.hpp: xsimd 8.1 does not compile at -O0 on AVX-512BW machines without it.
# -O0 (half the compile of -O1; the tests then run about half as fast) and line tables only:
# CMAKE_CXX_FLAGS_DEBUG=-g1, since Debug's own -g would come after -g1 and double the compile.
# The main build's Catch2 main, where it is built: the sanitizer builds link it (uninstrumented
# in both) instead of compiling their own.
CATCH_MAIN = $(wildcard $(CURDIR)/$(BUILD)/tests/libxsym_catch_main.a)
sanitize-build: deps
	@cmake $(call generator,build-sanitize) -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DXSYM_NATIVE=ON -DXSYM_BUILD_EXAMPLES=OFF -DXSYM_TESTS_ONE_RUNTIME=ON -DXSYM_TESTS_PCH=OFF \
	  -DXSYM_TESTS_CATCH_MAIN="$(CATCH_MAIN)" \
	  -DCMAKE_CXX_FLAGS="$(SANITIZE_FLAGS)" -DCMAKE_CXX_FLAGS_DEBUG=-g1 >/dev/null
	@cmake --build build-sanitize -j $(JOBS) --target $(addprefix test_,$(SANITIZE_AREAS))

test-sanitize: sanitize-build
	@cd build-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 XSYM_TEST_SANITIZED=1 \
	  ctest --output-on-failure -j $(JOBS) -R "^($(subst $(space),|,$(SANITIZE_AREAS)))$$"

test-sanitize-all:
	@$(MAKE) --no-print-directory test-sanitize SANITIZE_AREAS="$(SANITIZE_ALL_AREAS)"

# The threads area under ThreadSanitizer, in its own build: an access to shared state that no
# lock orders fails here even when no wrong value shows (CI runs this). XSYM_TEST_SANITIZED=1:
# the concurrency tests' loops a tenth as long (xsym_test::iterations), in both sanitizer runs.
tsan-build: deps
	@cmake $(call generator,build-tsan) -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DXSYM_BUILD_EXAMPLES=OFF -DXSYM_TESTS_PCH=OFF \
	  -DXSYM_TESTS_CATCH_MAIN="$(CATCH_MAIN)" \
	  -DCMAKE_CXX_FLAGS="-O0 -g1 -fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_CXX_FLAGS_DEBUG=-g1 >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target test_threads

test-tsan: tsan-build
	@cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" XSYM_TEST_SANITIZED=1 ctest --output-on-failure -R "^threads$$"

# Both sanitizer builds at once (CI): each spends minutes compiling its runtime alone on one
# core, so together they keep both cores busy; then their tests, also at once.
test-sanitizers:
	@$(MAKE) --no-print-directory -j 2 --output-sync=target sanitize-build tsan-build
	@$(MAKE) --no-print-directory -j 2 --output-sync=target test-sanitize test-tsan

# xsym over MPI: installs Open MPI (only this target does), then builds and runs the MPI tests on
# 1 and 2 ranks and the sharded example on 2 (`make test` runs them too once MPI is there).
mpi:
	@bash scripts/install-deps.sh --mpi
	@cmake $(call generator,$(BUILD)) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target test_mpi logistic_regression_mpi
	@cd $(BUILD) && ctest --output-on-failure -R "^(mpi|mpi_one_rank|mpi_after_finalize|example_mpi)$$"

# docs/scaling.md's numbers: AllReduce against bare MPI, the step per row and split, on 2 ranks then 1.
bench-mpi:
	@XSYM_DEPS_BENCH=1 bash scripts/install-deps.sh --mpi
	@cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DXSYM_BUILD_BENCH=ON -DXSYM_BUILD_TESTS=OFF >/dev/null
	@cmake --build build-bench -j $(JOBS) --target bench_mpi_scaling
	@for n in 2 1; do bash tests/mpi/run.sh mpiexec $$n build-bench/bench/bench_mpi_scaling; echo; done

# The CUDA builds (needs nvcc): the GPU test file (also part of make test), the example and the
# GPU bench (build/bench/gpu_elemwise).
cuda: configure
	@cmake --build $(BUILD) -j $(JOBS) --target test_gpu_cuda_build logistic_regression_cuda_build bench_gpu_elemwise_build

# Benchmarks: their own -O3 -march=native build, then bench/run.py writes bench/results/latest.json.
# The PyTensor peer (bench/peers/logreg_pytensor.py) runs where pip can install pytensor.
# It also times building the test suite from nothing (about 10 minutes on 2 cores):
# make bench BENCH_ARGS=--skip-test-build leaves that out.
BENCH_ARGS ?=
bench:
	@XSYM_DEPS_BENCH=1 bash scripts/install-deps.sh
	@python3 -c "import pytensor" 2>/dev/null || python3 -m pip install -q pytensor >/dev/null 2>&1 || \
	  echo "xsym: pip could not install pytensor; the bench leaves the PyTensor peer out" >&2
	@cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DXSYM_BUILD_BENCH=ON -DXSYM_BUILD_TESTS=OFF >/dev/null
	@cmake --build build-bench -j $(JOBS) --target bench_xsym bench_xsym_noprof bench_calls bench_calls_noprof bench_threads bench_mlp bench_broadcast logistic_regression
	python3 bench/run.py --build build-bench $(BENCH_ARGS)

# The accuracy sweep: every floating op against long double over at least 1e5 points and its
# edges, and whether a SIMD batch, the scalar tail and FAST_COMPILE agree (docs/performance.md).
ulps:
	@XSYM_DEPS_BENCH=1 bash scripts/install-deps.sh
	@cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DXSYM_BUILD_BENCH=ON -DXSYM_BUILD_TESTS=OFF >/dev/null
	@cmake --build build-bench -j $(JOBS) --target ulps
	@build-bench/bench/ulps

clean:
	rm -rf $(BUILD)
