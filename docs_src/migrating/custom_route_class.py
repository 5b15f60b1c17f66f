import time
from collections.abc import Callable, Coroutine
from typing import Any

import msgspec
from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class TimedRoute(APIRoute):
    """FastAPI's custom APIRoute class: it times every request its route handles."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def timed(request: Request) -> Response:
            started = time.perf_counter()
            response = await original(request)
            response.headers["X-Response-Time"] = f"{time.perf_counter() - started:.6f}"
            return response

        return timed


class City(msgspec.Struct):
    name: str
    population: int


# The class is combined with MsgspecRoute: its handler sees every request.
router = MsgspecRouter(route_class=TimedRoute)


@router.post("/cities")
async def create_city(city: City) -> City:
    return city


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
