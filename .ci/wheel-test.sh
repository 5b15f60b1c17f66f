#!/usr/bin/env bash
# `make wheel-test`: install what `make wheel` built into a fresh virtual environment and
# test it from a temporary folder where the source tree cannot be imported.
#   0. the README's install line for the wheel, run as written with the venv's pip first on
#      PATH, then the README's usage example against that install, with nothing but the
#      package's own dependencies installed (.ci/readme.py);
#   1. the repaired wheel: IMPLEMENTATION == "compiled", the suite once (both twins, by the
#      `twin` fixture), then the pure_smoke tests with MSGSPEC_FASTAPI_PURE=1;
#   2. the sdist with a C compiler that fails: a working pure install, with a warning, and
#      its pure_smoke tests (the suite in 1. already runs every test on the pure twin);
# The slow tests are left out: `make test` runs them. PYTHON picks the interpreter: CI
# builds and tests the wheel on CPython 3.13, where `make test` runs on 3.11.
#   3. the sdist with that compiler and MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1: no wheel;
#   4. the sdist with MSGSPEC_FASTAPI_NO_EXTENSIONS=1: a py3-none-any wheel.
set -euo pipefail

python=${PYTHON:-python3}
venv=${WHEEL_TEST_VENV:-.venv-wheel-test}
read -r -a pytest_args <<< "${PYTEST_ARGS:--q}"

fail() { echo "wheel-test: $*" >&2; exit 1; }

shopt -s nullglob
wheels=(wheelhouse/*.whl)
sdists=(dist/*.tar.gz)
[ "${#wheels[@]}" -eq 1 ] || fail "expected one wheel in wheelhouse/ (run make wheel)"
[ "${#sdists[@]}" -eq 1 ] || fail "expected one sdist in dist/ (run make wheel)"
wheel=$PWD/${wheels[0]}
sdist=$PWD/${sdists[0]}
case $wheel in *manylinux*) ;; *) fail "$wheel is not a repaired manylinux wheel" ;; esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/.ci"
# docs/ and docs_src/: tests/test_docs_examples.py runs the docs' examples on the install too;
# README.md and bench/: tests/test_benchmark_tables.py reads the tables and the results;
# build_support/: tests/test_build_training.py runs the training of a profile-guided build.
cp -r tests docs docs_src bench build_support pyproject.toml README.md "$work/"
cp .ci/check_install.py .ci/readme.py "$work/.ci/"

rm -rf "$venv"
"$python" -m venv "$venv"
vpy=$PWD/$venv/bin/python
"$vpy" -m pip install -q --upgrade pip

line=$("$python" .ci/readme.py wheel-install)
echo "== wheel-test 0: the README's \`$line\`, then its usage example"
PATH="$PWD/$venv/bin:$PATH" bash -euc "$line"
(cd "$work" && "$vpy" .ci/readme.py usage)

echo "== wheel-test 1: $(basename "$wheel")"
"$vpy" -m pip install -q "${wheel}[test]"
(cd "$work" && "$vpy" .ci/check_install.py compiled --skip-slow -- "${pytest_args[@]}")

echo "== wheel-test 2: $(basename "$sdist") with CC=false"
"$vpy" -m pip uninstall -q -y msgspec-fastapi
log=$work/sdist-install.log
if ! CC=false "$vpy" -m pip install -v --no-binary msgspec-fastapi --no-cache-dir "$sdist" \
        > "$log" 2>&1; then
    cat "$log"
    fail "the sdist did not install without a working compiler"
fi
grep "msgspec-fastapi: WARNING: the C compiler failed" "$log" || fail "no warning given"
grep "msgspec-fastapi: request path built: pure" "$log" || fail "the build did not say pure"
(cd "$work" && "$vpy" .ci/check_install.py pure --smoke -- "${pytest_args[@]}")

echo "== wheel-test 3: CC=false and MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1 must fail"
log=$work/sdist-required.log
if CC=false MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1 "$vpy" -m pip wheel -v --no-deps \
        --no-cache-dir --wheel-dir "$work/required" "$sdist" > "$log" 2>&1; then
    fail "a wheel came out of a failing compiler with MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1"
fi
grep "the C compiler failed and MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1" "$log"

echo "== wheel-test 4: MSGSPEC_FASTAPI_NO_EXTENSIONS=1 gives a pure wheel"
MSGSPEC_FASTAPI_NO_EXTENSIONS=1 "$vpy" -m pip wheel -q --no-deps --no-cache-dir \
    --wheel-dir "$work/noext" "$sdist"
pure_wheels=("$work"/noext/*-py3-none-any.whl)
[ "${#pure_wheels[@]}" -eq 1 ] || fail "no py3-none-any wheel: $(ls "$work/noext")"
basename "${pure_wheels[0]}"

echo "wheel-test: all passed"
