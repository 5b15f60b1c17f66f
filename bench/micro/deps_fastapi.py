"""--deps on FastAPI: the dependencies in FastAPI's spelling, on a MsgspecRouter (compiled,
pure, upstream: one definition, the worker decides which `msgspec_fastapi` it imports) and
on a plain APIRouter with Pydantic models.

The floor (deps_floor.py) calls these same dependency and endpoint functions by hand.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Security
from fastapi.security import SecurityScopes
from pydantic import BaseModel

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
    unrelated,
    unrelated_override,
)


async def get_session() -> AsyncIterator[Session]:
    session = Session()
    try:
        yield session
    finally:
        session.close()


async def get_current_user(
    session: Annotated[Session, Depends(get_session)],
    authorization: Annotated[str | None, Header()] = None,
) -> User:
    user = session.user(authorization)
    if user is None:
        raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "Bearer"})
    return user


async def authorized_user(
    security_scopes: SecurityScopes, user: Annotated[User, Depends(get_current_user)]
) -> User:
    if not user.scopes.issuperset(security_scopes.scopes):
        raise HTTPException(403, "Not enough permissions")
    return user


class ItemRepository(Repository):
    """The class dependency (FastAPI calls it in the threadpool, as any sync callable)."""

    def __init__(self, session: Annotated[Session, Depends(get_session)]) -> None:
        super().__init__(session)


async def get_settings() -> Settings:
    return SETTINGS


async def check_tenant(x_tenant: Annotated[str | None, Header()] = None) -> None:
    if x_tenant not in TENANTS:
        raise HTTPException(403, "Unknown tenant")


def found(record: Record | None) -> Record:
    if record is None:
        raise HTTPException(404, "Item not found")
    return record


# The endpoints of the msgspec variants; the floor calls them too.
async def two_get(
    item_id: int,
    session: Annotated[Session, Depends(get_session)],
    user: Annotated[User, Depends(get_current_user)],
) -> ItemView:
    return item_view(found(session.record(item_id)), user)


async def two_post(
    item: NewItem,
    session: Annotated[Session, Depends(get_session)],
    user: Annotated[User, Depends(get_current_user)],
) -> NewItem:
    session.add(item)
    return item


async def deep_get(
    item_id: int,
    user: Annotated[User, Security(authorized_user, scopes=[READ_SCOPE])],
    repository: Annotated[ItemRepository, Depends()],
    settings: Annotated[Settings, Depends(get_settings)],
) -> DeepView:
    return deep_view(found(repository.get(item_id)), user, settings)


def _finish(app: FastAPI, override: bool) -> FastAPI:
    if override:
        app.dependency_overrides[unrelated] = unrelated_override
    return app


def route_index() -> bool:
    """Whether the imported msgspec_fastapi has the route index (never upstream 0.0.4)."""
    from common import route_index_installer

    import msgspec_fastapi

    return route_index_installer(msgspec_fastapi) is not None


def executor(variant: str) -> str | None:
    """The module that runs dependency plans for `variant` (None for upstream 0.0.4),
    checked to be compiled for the compiled variant and Python for the pure one, so that
    a build without the extension cannot pass the pure executor off as the compiled one."""
    from common import WrongPackage

    import msgspec_fastapi

    if not hasattr(msgspec_fastapi, "IMPLEMENTATION"):
        return None
    from msgspec_fastapi import _select

    module = _select.companion(_select.EXECUTOR, _select.twin)
    if _select.is_compiled(module) != (variant == "compiled"):
        raise WrongPackage(f"{variant} runs the dependency executor from {module.__file__}")
    return str(module.__name__)


def build_router_app(override: bool) -> FastAPI:
    from common import route_index_installer

    import msgspec_fastapi
    from msgspec_fastapi import MsgspecRouter, install_openapi

    two = MsgspecRouter(prefix="/two")
    two.get("/items/{item_id}")(two_get)
    two.post("/items")(two_post)
    deep = MsgspecRouter(prefix="/deep", dependencies=[Depends(check_tenant)])
    deep.get("/items/{item_id}")(deep_get)
    app = FastAPI()
    app.include_router(two)
    app.include_router(deep)
    install_openapi(app, two, deep)
    install_dispatch = route_index_installer(msgspec_fastapi)
    if install_dispatch is not None:
        install_dispatch(app)
    return _finish(app, override)


class ItemViewModel(BaseModel):
    id: int
    name: str
    price: float
    owner: str


class NewItemModel(BaseModel):
    name: str
    price: float
    tags: list[str] = []


class DeepViewModel(BaseModel):
    id: int
    name: str
    price: float
    owner: str
    currency: str


def build_pydantic_app(
    override: bool, router_class: type[APIRouter] = APIRouter, ours: bool = False
) -> FastAPI:
    """FastAPI's app with Pydantic models; `ours`: on `router_class` (a MsgspecRouter),
    with install_dispatch (the variants pydantic-compiled and pydantic-pure)."""
    two = router_class(prefix="/two")

    @two.get("/items/{item_id}")
    async def pydantic_two_get(
        item_id: int,
        session: Annotated[Session, Depends(get_session)],
        user: Annotated[User, Depends(get_current_user)],
    ) -> ItemViewModel:
        record = found(session.record(item_id))
        return ItemViewModel(id=record.id, name=record.name, price=record.price, owner=user.name)

    @two.post("/items")
    async def pydantic_two_post(
        item: NewItemModel,
        session: Annotated[Session, Depends(get_session)],
        user: Annotated[User, Depends(get_current_user)],
    ) -> NewItemModel:
        session.add(item)
        return item

    deep = router_class(prefix="/deep", dependencies=[Depends(check_tenant)])

    @deep.get("/items/{item_id}")
    async def pydantic_deep_get(
        item_id: int,
        user: Annotated[User, Security(authorized_user, scopes=[READ_SCOPE])],
        repository: Annotated[ItemRepository, Depends()],
        settings: Annotated[Settings, Depends(get_settings)],
    ) -> DeepViewModel:
        record = found(repository.get(item_id))
        return DeepViewModel(
            id=record.id,
            name=record.name,
            price=record.price,
            owner=user.name,
            currency=settings.currency,
        )

    app = FastAPI()
    app.include_router(two)
    app.include_router(deep)
    if ours:
        from common import route_index_installer

        import msgspec_fastapi

        install_dispatch = route_index_installer(msgspec_fastapi)
        assert install_dispatch is not None
        install_dispatch(app)
    return _finish(app, override)
