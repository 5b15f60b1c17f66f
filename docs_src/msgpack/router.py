import msgspec
from fastapi import FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


router = MsgspecRouter(msgpack=True)


@router.post("/cities")
async def create_city(city: City) -> City:
    return city


# A route can decide for itself: this one stays JSON only.
@router.get("/cities/raw", msgpack=False)
async def raw_city() -> msgspec.Raw:
    return msgspec.Raw(b'{"name":"Lyon","population":522250}')


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
