from collections.abc import AsyncIterator

import msgspec
from fastapi import FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


router = MsgspecRouter()


@router.get("/cities/stream")
async def stream_cities() -> AsyncIterator[City]:
    # application/jsonl: one City per line.
    for name, population in [("Lyon", 522250), ("Porto", 231800)]:
        yield City(name, population)


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
