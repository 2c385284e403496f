# The two commands in the README: `make run` and `make test`. Everything else
# here is a building block of those two.
JOBS      ?= $(shell nproc)
MODEL     ?= models/pycode-target-f16.gguf
PROMPT    ?= def fibonacci(n):
FUZZ_SECS ?= 60

.PHONY: run test bootstrap build build-asan build-tsan build-fuzz test-release test-asan test-tsan test-fuzz clean check-long

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

# Each fuzz target runs FUZZ_SECS seconds from its committed seed corpus.
test-fuzz: build-fuzz
	@bash scripts/run-fuzz.sh build-fuzz $(FUZZ_SECS)

test: test-release test-asan test-tsan test-fuzz
	@echo "make test: release, asan+ubsan, tsan and fuzz suites all passed"

# Long checks that do not belong in make test: the whole-file perplexity
# against llama-perplexity's 11.6421 (about 3 minutes on 2 cores).
check-long: build
	@./build/brisk perplexity -m models/pycode-target-f16.gguf -f ../shared/models/data/val.txt -c 512 | tee /tmp/brisk-ppl.txt
	@awk '/Final estimate/ { d = ($$5 - 11.6421) / 11.6421; if (d < 0) d = -d; if (d > 0.005) { print "FAIL: PPL differs from llama.cpp by more than 0.5%"; exit 1 } else print "PPL within 0.5% of llama-perplexity (11.6421)" }' /tmp/brisk-ppl.txt

clean:
	rm -rf build build-asan build-tsan build-fuzz
