#!/usr/bin/env bash
# Compare the builds that cibuildwheel selects from pyproject.toml, on each platform, with
# the list committed in .ci/build-identifiers.txt. Works offline.
set -euo pipefail
cibuildwheel=${1:-cibuildwheel}
expected=.ci/build-identifiers.txt

selected=$(
    for platform in linux macos windows; do
        "$cibuildwheel" --print-build-identifiers --platform "$platform" | sed "s/^/$platform /"
    done | sort
)
if ! diff -u <(grep -v '^#' "$expected" | grep . | sort) <(echo "$selected"); then
    echo "cibuildwheel's selection differs from $expected (-: expected, +: selected)" >&2
    exit 1
fi
echo "cibuildwheel selects the $(echo "$selected" | wc -l) builds listed in $expected"
