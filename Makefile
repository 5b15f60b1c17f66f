# Each target sets up its own virtual environment, so a fresh clone needs only
# Python 3.11+ and a C compiler.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LOW_VENV ?= .venv-lowest
LOW_PY := $(LOW_VENV)/bin/python
PYTEST_ARGS ?= -q

.PHONY: test test-lowest bench bench-quick lint fuzz clean

BENCH_ARGS ?=

$(VENV)/.installed: pyproject.toml setup.py src/msgspec_fastapi/_fastpath.pyx
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "Cython>=3.1" "setuptools>=77" wheel
	$(PY) -m pip install -q --no-build-isolation -e ".[test,dev]"
	touch $@

# The whole suite twice: compiled (and failing if it did not load), then pure.
test: $(VENV)/.installed
	MSGSPEC_FASTAPI_EXPECT=compiled $(PY) -m pytest $(PYTEST_ARGS)
	MSGSPEC_FASTAPI_PURE=1 MSGSPEC_FASTAPI_EXPECT=pure $(PY) -m pytest $(PYTEST_ARGS)

# The suite at the lowest supported versions, in a venv of its own.
test-lowest:
	$(PYTHON) -m venv $(LOW_VENV)
	$(LOW_PY) -m pip install -q --upgrade pip
	$(LOW_PY) -m pip install -q "Cython>=3.1" "setuptools>=77" wheel
	$(LOW_PY) -m pip install -q "fastapi==0.142.2" "msgspec==0.22.0"
	$(LOW_PY) -m pip install -q --no-build-isolation -e ".[test]"
	MSGSPEC_FASTAPI_EXPECT=compiled $(LOW_PY) -m pytest $(PYTEST_ARGS)
	MSGSPEC_FASTAPI_PURE=1 MSGSPEC_FASTAPI_EXPECT=pure $(LOW_PY) -m pytest $(PYTEST_ARGS)

$(VENV)/.bench-installed: $(VENV)/.installed bench/requirements.txt
	$(PY) -m pip install -q -r bench/requirements.txt
	touch $@

# The micro benchmark on one pinned core; see README "Benchmarks".
bench: $(VENV)/.bench-installed
	$(PY) bench/micro.py $(BENCH_ARGS)

# A smoke run of the same (tiny batches, nothing judged on speed) for CI.
bench-quick: $(VENV)/.bench-installed
	$(PY) bench/micro.py --quick --strict

# Fuzz both twins on both tiers for FUZZ_SECONDS (atheris where installed, else hypothesis).
# Failing inputs land in FUZZ_ARTIFACTS; replay one with `$(PY) tests/fuzz/run.py FILE`.
FUZZ_SECONDS ?= 60
fuzz: $(VENV)/.installed
	$(PY) tests/fuzz/run.py --seconds $(FUZZ_SECONDS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cython-lint src/msgspec_fastapi/_fastpath.pyx

clean:
	rm -rf $(VENV) $(LOW_VENV) build dist src/*.egg-info src/msgspec_fastapi/*.so src/msgspec_fastapi/_fastpath.c
