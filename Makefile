# The two commands: `make run` (the main job on a sample) and `make test`.
# Both set everything up themselves: virtualenv in .venv, pip install, build.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml setup.py | cksum | cut -d' ' -f1)
SOURCES := $(wildcard kbatch/*.pyx kbatch/*.pxd)
BUILT  := $(VENV)/.built

.PHONY: run test test-asan bench fuzz clean build

build: $(BUILT)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml setup.py | $(PY)
	$(BIN)/pip install -q "setuptools>=64" wheel "Cython>=3.1,<4" "numpy>=2"
	$(BIN)/pip install -q --no-build-isolation -e ".[test,bench,spark]"
	rm -f $(VENV)/.installed-* && touch $@

$(BUILT): $(STAMP) $(SOURCES) setup.py
	$(PY) setup.py -q build_ext --inplace
	touch $@

run: build
	$(PY) -m kbatch.cli main $(if $(LOG_DIR),--log-dir $(LOG_DIR))

test: build
	$(PY) -m pytest -q

bench: build
	$(PY) -m pytest bench -q --benchmark-only --benchmark-columns=median,ops,rounds \
		--benchmark-json=bench/results.json
	$(PY) bench/report.py bench/results.json

clean:
	rm -rf build kbatch/*.c kbatch/*.so $(BUILT)
