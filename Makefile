# The two commands in the README: `make run` and `make test`. Everything else
# here is a building block of those two.
JOBS      ?= $(shell nproc)
MODEL     ?= models/pycode-target-f16.gguf
PROMPT    ?= def fibonacci(n):
FUZZ_SECS ?= 20
FUZZ_JOBS ?= $(JOBS)

.PHONY: run test bootstrap build build-asan build-tsan build-fuzz build-aarch64 test-release test-asan test-tsan test-fuzz \
        test-aarch64 clean check-long

bootstrap:
	@bash scripts/bootstrap.sh

build: bootstrap
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j$(JOBS)

run: build
	./build/brisk run -m $(MODEL) -p "$(PROMPT)" -n 128 --temp 0.7 --seed 42

build-asan: bootstrap
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DBRISK_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j$(JOBS)

build-tsan: bootstrap
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DBRISK_TSAN=ON >/dev/null
	@cmake --build build-tsan -j$(JOBS)

FUZZ_TARGETS = $(basename $(notdir $(wildcard fuzz/fuzz_*.c)))

build-fuzz: bootstrap
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DBRISK_FUZZ=ON -DBRISK_SANITIZE=ON >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target $(FUZZ_TARGETS)

test-release: build
	cd build && ctest --output-on-failure -j$(JOBS)

# Sanitizer build: the same suite under ASan+UBSan. BRISK_TEST_QUICK trims the
# few long tests that would dominate the sanitizer run (they still run, smaller).
test-asan: build-asan
	cd build-asan && BRISK_TEST_QUICK=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS)

test-tsan: build-tsan
	cd build-tsan && BRISK_TEST_QUICK=1 ctest --output-on-failure -j$(JOBS) -L tsan

# Each fuzz target runs FUZZ_SECS seconds from its committed seed corpus, FUZZ_JOBS targets at a
# time (one core each: a libFuzzer process is single-threaded); the 30-minute campaigns are in
# docs/RELIABILITY.md.
test-fuzz: build-fuzz
	@bash scripts/run-fuzz.sh build-fuzz $(FUZZ_SECS) $(FUZZ_JOBS)

# aarch64: the NEON kernel tables, cross-compiled (cmake/aarch64-linux-gnu.cmake)
# and run under qemu-aarch64 -cpu max (dotprod, so both NEON tables run): every
# table against ref, the golden logits (a subset of ../shared/golden, one file per
# weight type; AARCH64_GOLDEN=all for every file), batch invariance, and the NEON
# quantized-cache attention kernels against ref (test_kv_quant_kernels: test_kv_quant's kernel
# check alone, under a second; the whole of test_kv_quant takes over 15 minutes under qemu and
# is run by hand: cd build-aarch64 && ctest -R '^test_kv_quant$$').
AARCH64_TESTS  = ^(test_kernels|test_golden|test_engine|test_kv_quant_kernels)$$
AARCH64_GOLDEN ?=
AARCH64_READY  = command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null && \
                 test -f /usr/lib/aarch64-linux-gnu/pkgconfig/libpcre2-8.pc && test -f /usr/lib/aarch64-linux-gnu/pkgconfig/jansson.pc

build-aarch64: bootstrap
	@cmake --no-warn-unused-cli -S . -B build-aarch64 -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
	  $(if $(AARCH64_GOLDEN),-DBRISK_CROSS_GOLDEN=$(AARCH64_GOLDEN),-UBRISK_CROSS_GOLDEN) >/dev/null
	@cmake --build build-aarch64 -j$(JOBS) --target brisk test_kernels test_golden test_engine test_kv_quant

test-aarch64: bootstrap
	@if $(AARCH64_READY); then \
	  $(MAKE) --no-print-directory build-aarch64 && cd build-aarch64 && \
	  ctest --output-on-failure -j$(JOBS) -R '$(AARCH64_TESTS)'; \
	else \
	  echo "SKIP test-aarch64: the aarch64 cross compiler, qemu-aarch64 or the arm64 pcre2/jansson packages are missing"; \
	  echo "     (scripts/bootstrap.sh installs gcc-aarch64-linux-gnu qemu-user libpcre2-dev:arm64 libjansson-dev:arm64)"; \
	fi

test: test-release test-asan test-tsan test-fuzz test-aarch64
	@echo "make test: release, asan+ubsan, tsan, fuzz and aarch64 (qemu) suites all passed"

# Long checks that do not belong in make test: the whole-file perplexity
# against llama-perplexity's 11.6421 (about 3 minutes on 2 cores).
check-long: build
	@./build/brisk perplexity -m models/pycode-target-f16.gguf -f ../shared/models/data/val.txt -c 512 | tee /tmp/brisk-ppl.txt
	@awk '/Final estimate/ { d = ($$5 - 11.6421) / 11.6421; if (d < 0) d = -d; if (d > 0.005) { print "FAIL: PPL differs from llama.cpp by more than 0.5%"; exit 1 } else print "PPL within 0.5% of llama-perplexity (11.6421)" }' /tmp/brisk-ppl.txt

clean:
	rm -rf build build-asan build-tsan build-fuzz build-aarch64
