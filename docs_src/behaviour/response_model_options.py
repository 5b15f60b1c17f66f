import msgspec
from fastapi import FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str
    population: int
    mayor: str | None = None
    # Left out of the response while UNSET: the field a PATCH may leave out.
    nickname: str | msgspec.UnsetType = msgspec.UNSET


LYON = City("Lyon", 522250)

router = MsgspecRouter()


@router.get("/cities/lyon", response_model_exclude_none=True)
async def get_city() -> City:
    return LYON  # {"name": "Lyon", "population": 522250}


@router.get("/cities/lyon/name", response_model_include={"name"})
async def get_city_name() -> City:
    return LYON  # {"name": "Lyon"}


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
