import msgspec
from fastapi import FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


router = MsgspecRouter()


@router.post("/cities")
async def create_city(city: City) -> City:
    return city


app = FastAPI()
app.include_router(router)
install_openapi(app, router)  # msgspec's schemas in the OpenAPI document
install_dispatch(app)  # the route index and one entry for FastAPI's route loop and layers
