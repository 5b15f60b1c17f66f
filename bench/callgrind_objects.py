"""An event's own cost by binary (the `ob=` object files), read from a callgrind output file:
which of the interpreter, the framework's compiled modules, msgspec and libc the
instructions and cache misses of a batch were spent in. Only the standard library: tests
import it by its path."""

from __future__ import annotations

import re
from collections import Counter

# `ob=(3) /path` defines a compressed name, `ob=(3)` reuses it; ob and cob share the ids.
_COMPRESSED = re.compile(r"\((\d+)\)(?: (.*))?$")
# The binaries grouped by what they are part of, first match wins.
GROUPS = (
    ("ours", "/msgspec_fastapi/"),
    ("blacksheep", "/blacksheep/"),
    ("msgspec", "/msgspec/"),
    ("interpreter", "/libpython"),
    ("interpreter", "/lib-dynload/"),
    ("libc", "/libc."),
)
OTHER = "other"


def group_of(path: str) -> str:
    return next((group for group, part in GROUPS if part in path), OTHER)


def self_cost_by_group(text: str, event: str) -> Counter[str]:
    """`event`'s own cost (calls' inclusive costs left out) in each group of binaries."""
    names: dict[str, str] = {}
    events: list[str] = []
    found: Counter[str] = Counter()
    current = OTHER
    after_call = False
    for line in text.splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith(("ob=", "cob=")):
            value = line.split("=", 1)[1]
            compressed = _COMPRESSED.match(value)
            if compressed is not None:
                key, given = compressed.groups()
                if given is not None:
                    names[key] = given
                value = names[key]
            if line.startswith("ob="):
                current = group_of(value)
        elif line.startswith("calls="):
            after_call = True
        elif line[:1].isdigit() or line[:1] in ("+", "-", "*"):
            if after_call:  # the call's inclusive cost, counted where it was spent
                after_call = False
                continue
            costs = dict(zip(events, line.split()[1:], strict=False))
            found[current] += int(costs.get(event, 0))
    return found
