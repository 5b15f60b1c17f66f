import msgspec
from fastapi import FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch


class Note(msgspec.Struct):
    text: str


# A little above the largest body expected; smaller where the bodies are small.
router = MsgspecRouter(max_body_size=1_048_576)


@router.post("/notes", max_body_size=1024)
async def add_note(note: Note) -> Note:
    return note


app = FastAPI()
app.include_router(router)
install_dispatch(app)
