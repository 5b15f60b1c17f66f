from collections.abc import AsyncIterator

import msgspec
from fastapi import FastAPI
from fastapi.sse import EventSourceResponse, ServerSentEvent

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class Tick(msgspec.Struct):
    n: int


router = MsgspecRouter()


@router.get("/ticks", response_class=EventSourceResponse)
async def ticks() -> AsyncIterator[Tick]:
    yield Tick(1)  # a bare item is its event's data
    yield ServerSentEvent(data=Tick(2), event="tick", id="2")


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
