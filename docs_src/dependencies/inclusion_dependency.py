import msgspec
from fastapi import Depends, FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str


class Signature(msgspec.Struct):
    author: str


def signed(signature: Signature) -> str:
    # Added by one inclusion only: there the body holds it beside the endpoint's city.
    return signature.author


router = MsgspecRouter()


@router.post("/cities")
async def create_city(city: City) -> City:
    return city


app = FastAPI()
# POST /open/cities takes the City alone: {"name": "Lyon"}.
app.include_router(router, prefix="/open")
# POST /signed/cities takes both, by name: {"city": {...}, "signature": {...}}.
app.include_router(router, prefix="/signed", dependencies=[Depends(signed)])
install_openapi(app, router)
install_dispatch(app)
