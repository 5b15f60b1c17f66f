from typing import Annotated

import msgspec
from fastapi import FastAPI, Form

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class Login(msgspec.Struct):
    username: Annotated[str, msgspec.Meta(min_length=1)]
    password: str
    remember: bool = False


router = MsgspecRouter()


@router.post("/login")
async def login(data: Annotated[Login, Form()]) -> dict[str, object]:
    return {"user": data.username, "remember": data.remember}


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
