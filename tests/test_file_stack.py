"""The exit stack the entry makes per request for FastAPI's form files (`_compat.FileStack`):
an AsyncExitStack that makes its deque of callbacks only when one is pushed, and behaves as
contextlib's stack in every other way."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any

import pytest

from msgspec_fastapi import _compat
from msgspec_fastapi._compat import EXIT_CALLBACKS_ATTR, FileStack, file_stack_class


def test_this_pythons_contextlib_gets_the_file_stack() -> None:
    assert _compat.FILE_STACK_CLASS is FileStack
    assert issubclass(FileStack, AsyncExitStack)


def test_a_new_file_stack_has_no_deque_and_reads_as_empty() -> None:
    stack = FileStack()
    assert EXIT_CALLBACKS_ATTR not in vars(stack)
    assert not getattr(stack, EXIT_CALLBACKS_ATTR)


def test_every_kind_of_push_runs_last_first_when_the_stack_closes() -> None:
    ran: list[str] = []

    @contextmanager
    def sync_context() -> Iterator[None]:
        yield
        ran.append("enter_context")

    @asynccontextmanager
    async def async_context() -> AsyncIterator[None]:
        yield
        ran.append("enter_async_context")

    def exit_callback(*details: Any) -> None:
        ran.append("push")

    async def async_exit(*details: Any) -> None:
        ran.append("push_async_exit")

    async def main() -> None:
        stack = FileStack()
        stack.push(exit_callback)
        stack.callback(ran.append, "callback")
        stack.enter_context(sync_context())
        stack.push_async_exit(async_exit)
        stack.push_async_callback(asyncio.sleep, 0)
        await stack.enter_async_context(async_context())
        assert type(getattr(stack, EXIT_CALLBACKS_ATTR)) is deque
        await stack.aclose()

    asyncio.run(main())
    assert ran == ["enter_async_context", "push_async_exit", "enter_context", "callback", "push"]


def test_a_callback_may_swallow_the_exception_the_stack_closes_with() -> None:
    async def main() -> bool:
        stack = FileStack()
        stack.push(lambda *details: True)
        return bool(await stack.__aexit__(ValueError, ValueError("x"), None))

    assert asyncio.run(main()) is True


def test_pop_all_hands_the_callbacks_to_a_new_file_stack() -> None:
    ran: list[str] = []

    async def main() -> None:
        stack = FileStack()
        stack.callback(ran.append, "moved")
        moved = stack.pop_all()
        assert type(moved) is FileStack
        await stack.aclose()
        assert ran == []
        await moved.aclose()

    asyncio.run(main())
    assert ran == ["moved"]


def test_a_contextlib_that_keeps_a_push_elsewhere_gets_asyncexitstack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def push_elsewhere(self: Any, exit: Any) -> Any:
        self.pushed = [exit]
        return exit

    monkeypatch.setattr(contextlib._BaseExitStack, "push", push_elsewhere)  # type: ignore[attr-defined]
    assert file_stack_class() is AsyncExitStack


def test_a_contextlib_that_appends_to_the_deque_itself_gets_asyncexitstack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def push_directly(self: Any, exit: Any) -> Any:
        self._exit_callbacks.append((True, exit))
        return exit

    monkeypatch.setattr(contextlib._BaseExitStack, "push", push_directly)  # type: ignore[attr-defined]
    assert file_stack_class() is AsyncExitStack


def test_a_contextlib_without_a_deque_of_callbacks_gets_asyncexitstack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def keep_a_list(self: Any) -> None:
        self._exit_callbacks = []

    monkeypatch.setattr(contextlib._BaseExitStack, "__init__", keep_a_list)  # type: ignore[attr-defined]
    assert file_stack_class() is AsyncExitStack
