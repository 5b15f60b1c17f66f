"""What --formats, --models and --deps share: apps in this one process, on one event loop,
timed in batches. --formats and --models run every variant in the driver's process; --deps
runs one per worker process (worker.py), as the city routes do."""

from __future__ import annotations

import asyncio
import gc
from typing import Any, Generic, TypeVar

from .asgi import ASGIApp, Lifespan

Key = TypeVar("Key")


class InProcessBench(Generic[Key]):
    """Apps started with their lifespan; `_batch(key, count)` times `count` requests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.apps: dict[str, tuple[ASGIApp, dict[str, Any]]] = {}
        self.lifespans: list[Lifespan] = []

    def start(self, name: str, app: ASGIApp) -> None:
        lifespan = Lifespan(app)
        self.loop.run_until_complete(lifespan.startup())
        self.lifespans.append(lifespan)
        self.apps[name] = (app, lifespan.state)

    async def _batch(self, key: Key, count: int) -> tuple[int, int]:
        """Wall and CPU nanoseconds of `count` requests, each answer checked."""
        raise NotImplementedError

    def run(self, key: Key, count: int) -> tuple[int, int]:
        # Each batch starts from a clean heap, so that no batch pays for earlier garbage.
        gc.collect()
        return self.loop.run_until_complete(self._batch(key, count))

    def size(self, key: Key, seconds: float, target: float) -> int:
        """Warm up for `seconds`, then the batch size that takes about `target` seconds."""
        return self.warm_up(key, seconds, target)[0]

    def warm_up(self, key: Key, seconds: float, target: float) -> tuple[int, float]:
        """size(), and the µs per request of the last warm-up batch (a worker's answer)."""
        count, spent = 1, 0
        while True:
            elapsed, _ = self.run(key, count)
            spent += elapsed
            if spent >= seconds * 1e9 and elapsed >= min(target, 0.05) * 1e9:
                return max(1, round(target * 1e9 * count / elapsed)), elapsed / count / 1e3
            if elapsed < 0.05e9:
                count *= 2

    def close(self) -> None:
        for lifespan in self.lifespans:
            self.loop.run_until_complete(lifespan.shutdown())
        self.loop.close()
