#!/usr/bin/env bash
# `make check-clone`: a clone made the way git makes one on Windows by default
# (core.symlinks=false) installs with every compiled module, so the build relies on no
# symbolic link. Clones the committed HEAD, installs it in a fresh venv with the
# extensions required, and imports each compiled module from outside the source tree.
set -euo pipefail

python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git -c core.symlinks=false clone -q "$PWD" "$work/clone"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1 "$work/venv/bin/python" -m pip install -q "$work/clone"
cd "$work"
"$work/venv/bin/python" - <<'PY'
from msgspec_fastapi import _select

for pair in _select.PAIRS:
    module = _select.load(pair, "compiled")
    assert module is not None and _select.is_compiled(module), f"{pair} is not compiled"
    print(f"check-clone: {module.__name__} compiled ({module.__file__})")
PY
