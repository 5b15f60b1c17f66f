"""What every --deps variant's app shares: the records, users and session its dependencies
work with, and the answers they build.

The apps (deps_fastapi.py, deps_litestar.py, deps_floor.py) import only this module and
each other, never deps.py, which picks one of them for a worker; so the modules form no
import cycle.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any, ClassVar

import msgspec

ITEM_ID = 7
TOKEN = "tok-ada"
TENANT = "acme"
READ_SCOPE = "items:read"


class Record(msgspec.Struct, frozen=True):
    """A row of the pretend database."""

    id: int
    name: str
    price: float


class User(msgspec.Struct, frozen=True):
    name: str
    scopes: frozenset[str]


class Settings(msgspec.Struct, frozen=True):
    currency: str
    page_size: int


class ItemView(msgspec.Struct, kw_only=True):
    """two-get's answer: the record and who asked."""

    id: int
    name: str
    price: float
    owner: str


class NewItem(msgspec.Struct, kw_only=True):
    """two-post's body and answer."""

    name: str
    price: float
    tags: list[str] = []


class DeepView(msgspec.Struct, kw_only=True):
    """deep-get's answer: the record, who asked and the settings' currency."""

    id: int
    name: str
    price: float
    owner: str
    currency: str


RECORDS = {i: Record(id=i, name=f"item {i}", price=i * 1.25) for i in range(1, 101)}
USERS = {
    TOKEN: User("ada", frozenset({READ_SCOPE, "items:write"})),
    "tok-bob": User("bob", frozenset()),
}
TENANTS = frozenset({TENANT})
SETTINGS = Settings(currency="EUR", page_size=20)


class Session:
    """Stands in for a database session: a yield dependency opens one per request, and its
    teardown closes it. `live` counts the open ones, so the bench can check that every
    teardown ran."""

    live: ClassVar[int] = 0
    __slots__ = ("added", "closed")

    def __init__(self) -> None:
        self.added: list[object] = []
        self.closed = False
        Session.live += 1

    def user(self, authorization: str | None) -> User | None:
        """The user whose bearer token `authorization` carries, or None."""
        if authorization is None or not authorization.startswith("Bearer "):
            return None
        return USERS.get(authorization[7:])

    def record(self, item_id: int) -> Record | None:
        return RECORDS.get(item_id)

    def add(self, obj: object) -> None:
        self.added.append(obj)

    def close(self) -> None:
        self.closed = True
        Session.live -= 1


class Repository:
    """The class dependency's work: reads records through the session it is given."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, item_id: int) -> Record | None:
        return self.session.record(item_id)


def item_view(record: Record, user: User) -> ItemView:
    return ItemView(id=record.id, name=record.name, price=record.price, owner=user.name)


def deep_view(record: Record, user: User, settings: Settings) -> DeepView:
    return DeepView(
        id=record.id,
        name=record.name,
        price=record.price,
        owner=user.name,
        currency=settings.currency,
    )


async def unrelated() -> str:
    """A dependency no route uses: the override cases override it."""
    return "real"


async def unrelated_override() -> str:
    return "overridden"


# two-post's body and answer.
NEW_ITEM = NewItem(name="new item", price=19.5, tags=["new", "sale"])


async def close_generator(generator: AsyncGenerator[Any, None], error: Exception | None) -> None:
    """End a yield dependency driven by hand: resumed after success, `error` thrown in
    otherwise (the floor's and BlackSheep's handlers)."""
    if error is None:
        await anext(generator, None)
        return
    with contextlib.suppress(StopAsyncIteration):
        await generator.athrow(error)
