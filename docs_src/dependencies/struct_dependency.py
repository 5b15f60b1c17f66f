from typing import Annotated

import msgspec
from fastapi import Depends, FastAPI, Header, HTTPException

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


def current_user(authorization: Annotated[str | None, Header()] = None) -> str:
    if authorization != "Bearer secret":
        raise HTTPException(401, "not authenticated")
    return "ada"


def checked_city(city: City) -> City:
    # The body is decoded once by the request path and handed to the dependency.
    if city.population < 0:
        raise HTTPException(400, "a population cannot be negative")
    return city


router = MsgspecRouter(dependencies=[Depends(current_user)])


@router.post("/cities")
async def create_city(city: Annotated[City, Depends(checked_city)]) -> City:
    return city


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
