"""--deps on Litestar: the same dependencies, each a `Provide`, with the same Structs.

Litestar injects a dependency by parameter name, and only where a handler or another
dependency asks for it: the router-level tenant check is a `Provide` in the router's
`dependencies` that the handler names (`tenant`), so that it runs on every request as
FastAPI's `dependencies=[...]` does. Litestar has no `SecurityScopes`: the scope check
reads the scope the route needs from a constant. The class dependency is called in a
thread (`sync_to_thread=True`), as FastAPI calls it. Litestar has no dependency
overrides, so it answers the cases without them only (deps.NO_OVERRIDES).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Annotated

from litestar import Litestar, Router, get, post
from litestar.di import Provide
from litestar.exceptions import NotAuthorizedException, NotFoundException, PermissionDeniedException
from litestar.params import Parameter

from .deps_common import (
    READ_SCOPE,
    SETTINGS,
    TENANTS,
    DeepView,
    ItemView,
    NewItem,
    Record,
    Repository,
    Session,
    Settings,
    User,
    deep_view,
    item_view,
)


async def provide_session() -> AsyncGenerator[Session, None]:
    session = Session()
    try:
        yield session
    finally:
        session.close()


async def provide_user(
    session: Session,
    authorization: Annotated[str | None, Parameter(header="authorization")] = None,
) -> User:
    user = session.user(authorization)
    if user is None:
        raise NotAuthorizedException("Not authenticated")
    return user


async def provide_authorized_user(user: User) -> User:
    if READ_SCOPE not in user.scopes:
        raise PermissionDeniedException("Not enough permissions")
    return user


async def provide_settings() -> Settings:
    return SETTINGS


async def provide_tenant(
    x_tenant: Annotated[str | None, Parameter(header="x-tenant")] = None,
) -> str:
    if x_tenant not in TENANTS:
        raise PermissionDeniedException("Unknown tenant")
    return x_tenant


def found(record: Record | None) -> Record:
    if record is None:
        raise NotFoundException("Item not found")
    return record


SESSION_AND_USER = {
    "session": Provide(provide_session),
    "user": Provide(provide_user),
}


@get("/two/items/{item_id:int}", dependencies=SESSION_AND_USER)
async def two_get(item_id: int, session: Session, user: User) -> ItemView:
    return item_view(found(session.record(item_id)), user)


# Litestar reserves the handler argument name `data` for the request body, and answers
# POST with 201 by default; the other variants answer 200.
@post("/two/items", dependencies=SESSION_AND_USER, status_code=200)
async def two_post(data: NewItem, session: Session, user: User) -> NewItem:
    session.add(data)
    return data


@get(
    "/items/{item_id:int}",
    dependencies={
        **SESSION_AND_USER,
        "authorized": Provide(provide_authorized_user),
        "repository": Provide(Repository, sync_to_thread=True),
        "settings": Provide(provide_settings),
    },
)
async def deep_get(
    item_id: int, tenant: str, authorized: User, repository: Repository, settings: Settings
) -> DeepView:
    return deep_view(found(repository.get(item_id)), authorized, settings)


def build_app(override: bool) -> Litestar:
    if override:
        raise ValueError("Litestar has no dependency overrides")
    deep = Router(
        path="/deep", route_handlers=[deep_get], dependencies={"tenant": Provide(provide_tenant)}
    )
    return Litestar(route_handlers=[two_get, two_post, deep])
