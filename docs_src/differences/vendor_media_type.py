import msgspec
from fastapi import FastAPI

from msgspec_fastapi import MsgspecJSONResponse, MsgspecRouter, install_dispatch, install_openapi


class JSONAPIResponse(MsgspecJSONResponse):
    media_type = "application/vnd.api+json"


class City(msgspec.Struct):
    name: str
    population: int


router = MsgspecRouter()


@router.get("/cities/1", response_class=JSONAPIResponse)
async def get_city() -> City:
    return City("Lyon", 522250)


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
