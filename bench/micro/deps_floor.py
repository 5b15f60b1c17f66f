"""--deps floors: raw ASGI endpoints that run each route's dependencies by hand.

Each endpoint calls the same dependency and endpoint functions as the FastAPI variants
(deps_fastapi.py), in FastAPI's order: the yield dependency driven by hand (resumed after
success, the error thrown in otherwise), the class dependency in the threadpool, a fresh
`SecurityScopes`, and with overrides set, each dependency looked up in them on every
request, as FastAPI honours them. Nothing is inspected, validated or cached beyond that:
the least work a dependency executor could do.

`floor`: the endpoints on a FastAPI app, where MsgspecRouter's routes sit (in routers
included into the app; overrides from `app.dependency_overrides`). `bare`: the same
endpoints behind a dict lookup in a bare ASGI app, no FastAPI around them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from fastapi import APIRouter, FastAPI, HTTPException
from fastapi.security import SecurityScopes
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route

from .deps_common import READ_SCOPE, NewItem, close_generator, unrelated, unrelated_override
from .deps_fastapi import (
    ItemRepository,
    authorized_user,
    check_tenant,
    deep_get,
    get_current_user,
    get_session,
    get_settings,
    two_get,
    two_post,
)
from .floor_asgi import BareApp, Receive, Scope, Send, answer, read_body

Overrides = dict[Callable[..., Any], Callable[..., Any]]


class _Endpoint:
    # A class instance, not a function, so that Starlette's Route treats it as a raw ASGI app.
    encoder = msgspec.json.Encoder()

    def __init__(self, overrides: Overrides) -> None:
        # The app's own dict, so that overrides set after the app is built count.
        self.overrides = overrides

    def resolve(self, call: Callable[..., Any]) -> Callable[..., Any]:
        overrides = self.overrides
        return overrides.get(call, call) if overrides else call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            status, result = 200, await self.handle(scope, receive)
        except HTTPException as exc:
            status, result = exc.status_code, {"detail": exc.detail}
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            status, result = 422, {"detail": str(exc)}
        await answer(send, status, self.encoder.encode(result))

    async def handle(self, scope: Scope, receive: Receive) -> object:
        raise NotImplementedError


def _header(headers: dict[bytes, bytes], name: bytes) -> str | None:
    value = headers.get(name)
    return None if value is None else value.decode("latin-1")


class _TwoGet(_Endpoint):
    async def handle(self, scope: Scope, receive: Receive) -> object:
        authorization = _header(dict(scope["headers"]), b"authorization")
        sessions = self.resolve(get_session)()
        session = await anext(sessions)
        error = None
        try:
            user = await self.resolve(get_current_user)(
                session=session, authorization=authorization
            )
            item_id: int = scope["path_params"]["item_id"]
            return await two_get(item_id=item_id, session=session, user=user)
        except Exception as exc:
            error = exc
            raise
        finally:
            await close_generator(sessions, error)


class _TwoPost(_Endpoint):
    decoder = msgspec.json.Decoder(NewItem)

    async def handle(self, scope: Scope, receive: Receive) -> object:
        # The body first: FastAPI reads and decodes it before any dependency runs.
        item = self.decoder.decode(await read_body(receive))
        authorization = _header(dict(scope["headers"]), b"authorization")
        sessions = self.resolve(get_session)()
        session = await anext(sessions)
        error = None
        try:
            user = await self.resolve(get_current_user)(
                session=session, authorization=authorization
            )
            return await two_post(item=item, session=session, user=user)
        except Exception as exc:
            error = exc
            raise
        finally:
            await close_generator(sessions, error)


class _DeepGet(_Endpoint):
    async def handle(self, scope: Scope, receive: Receive) -> object:
        headers = dict(scope["headers"])
        resolve = self.resolve
        # The router's dependencies come before the endpoint's own.
        await resolve(check_tenant)(x_tenant=_header(headers, b"x-tenant"))
        sessions = resolve(get_session)()
        session = await anext(sessions)
        error = None
        try:
            user = await resolve(get_current_user)(
                session=session, authorization=_header(headers, b"authorization")
            )
            user = await resolve(authorized_user)(
                security_scopes=SecurityScopes([READ_SCOPE]), user=user
            )
            repository = await run_in_threadpool(resolve(ItemRepository), session=session)
            settings = await resolve(get_settings)()
            item_id: int = scope["path_params"]["item_id"]
            return await deep_get(
                item_id=item_id, user=user, repository=repository, settings=settings
            )
        except Exception as exc:
            error = exc
            raise
        finally:
            await close_generator(sessions, error)


def build_floor_app(override: bool) -> FastAPI:
    app = FastAPI()
    overrides = app.dependency_overrides
    two = APIRouter()
    two.routes.extend(
        [
            Route("/two/items/{item_id:int}", _TwoGet(overrides), methods=["GET"]),
            Route("/two/items", _TwoPost(overrides), methods=["POST"]),
        ]
    )
    deep = APIRouter()
    deep.routes.append(Route("/deep/items/{item_id:int}", _DeepGet(overrides), methods=["GET"]))
    app.include_router(two)
    app.include_router(deep)
    if override:
        overrides[unrelated] = unrelated_override
    return app


def build_bare_app(override: bool) -> BareApp:
    app = BareApp()
    # Looked up per request by the endpoints, as FastAPI looks up app.dependency_overrides.
    overrides: Overrides = {}
    app.exact["POST", "/two/items"] = _TwoPost(overrides)
    app.with_id["GET", "/two/items"] = _TwoGet(overrides)
    app.with_id["GET", "/deep/items"] = _DeepGet(overrides)
    if override:
        overrides[unrelated] = unrelated_override
    return app
