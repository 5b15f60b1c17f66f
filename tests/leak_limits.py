"""The request counts and growth limits both leak tests use (test_leaks, test_dependency_leaks).

A leak of one small object per request would add a megabyte or more to the traced memory,
tens of thousands of memory blocks and megabytes of resident memory. Fewer requests for
slow runs, under valgrind for one (docs/development.md).
"""

from __future__ import annotations

import os

REQUESTS = int(os.environ.get("MSGSPEC_FASTAPI_LEAK_REQUESTS", 100_000))
TRACED = REQUESTS // 20
WARM_UP = min(5_000, REQUESTS // 10)
TRACED_GROWTH_LIMIT = 128 * 1024
BLOCKS_GROWTH_LIMIT = 2_000
RSS_GROWTH_LIMIT = 4 * 1024 * 1024
