"""--deps on BlackSheep: the two-dependency routes (two-get, two-post), with the same Structs.

BlackSheep binds the path value and the `Authorization` header (`FromHeader`); its
container (rodi) makes services but closes none, so it has no yield dependency: each
handler runs the session's async generator by hand and ends it as FastAPI does (resumed
after success, the error thrown in otherwise), and looks the user up through that
session. The msgspec work is the handler's, as in app_blacksheep.py. BlackSheep has no
`SecurityScopes` and no overrides; the six-dependency route and the override cases are
left to the others (deps.ROUTES_BY_VARIANT).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
from blacksheep import Application, Request, Response
from blacksheep.server.bindings import FromHeader

from .app_blacksheep import invalid, json_response
from .deps_common import NewItem, Session, User, close_generator, item_view


async def open_session() -> AsyncIterator[Session]:
    session = Session()
    try:
        yield session
    finally:
        session.close()


class NotAuthenticated(Exception):
    pass


async def current_user(session: Session, authorization: str | None) -> User:
    user = session.user(authorization)
    if user is None:
        raise NotAuthenticated
    return user


def not_authenticated() -> Response:
    response = json_response(401, {"detail": "Not authenticated"})
    response.add_header(b"www-authenticate", b"Bearer")
    return response


def build_app(override: bool) -> Application:
    if override:
        raise ValueError("BlackSheep has no dependency overrides")
    new_item = msgspec.json.Decoder(NewItem)
    app = Application()

    @app.router.get("/two/items/{int:item_id}")
    async def two_get(item_id: int, authorization: FromHeader[str | None] = None) -> Response:
        sessions = open_session()
        session = await anext(sessions)
        error = None
        try:
            user = await current_user(session, authorization and authorization.value)
            record = session.record(item_id)
            if record is None:
                return json_response(404, {"detail": "Item not found"})
            return json_response(200, item_view(record, user))
        except NotAuthenticated as exc:
            error = exc
            return not_authenticated()
        except Exception as exc:
            error = exc
            raise
        finally:
            await close_generator(sessions, error)

    @app.router.post("/two/items")
    async def two_post(request: Request, authorization: FromHeader[str | None] = None) -> Response:
        # The body first, as FastAPI reads and decodes it before any dependency runs.
        try:
            item = new_item.decode(await request.read() or b"")
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return invalid(exc)
        sessions = open_session()
        session = await anext(sessions)
        error = None
        try:
            await current_user(session, authorization and authorization.value)
            session.add(item)
            return json_response(200, item)
        except NotAuthenticated as exc:
            error = exc
            return not_authenticated()
        except Exception as exc:
            error = exc
            raise
        finally:
            await close_generator(sessions, error)

    return app
