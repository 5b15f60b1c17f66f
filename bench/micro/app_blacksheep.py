"""BlackSheep serving the same msgspec Structs: the city routes (in-process and --server).

BlackSheep (compiled with Cython) binds the path and query values and runs the handler;
the handler does the msgspec work itself, as the floor's endpoints do: the body read as
bytes and decoded by msgspec, the answer encoded by msgspec and returned as raw bytes
with the type application/json. BlackSheep's own JSON support (json.loads and
dataclasses or Pydantic) is left out, so that every variant pays the same msgspec work.
"""

from __future__ import annotations

import msgspec
from blacksheep import Application, Content, Request, Response

from .cities import LIMIT_MAX, PAGE_SIZE, Accepted, City, CityPage, CitySearch, Dataset, search

JSON = b"application/json"
_encode = msgspec.json.Encoder().encode


def json_response(status: int, result: object) -> Response:
    return Response(status, None, Content(JSON, _encode(result)))


def invalid(error: Exception) -> Response:
    return json_response(422, {"detail": str(error)})


def build_app(data: Dataset) -> Application:
    cities, by_id, by_country = data.cities, data.by_id, data.by_country
    validate_decoder = msgspec.json.Decoder(list[City])
    search_decoder = msgspec.json.Decoder(CitySearch)
    app = Application()
    get, post = app.router.get, app.router.post

    @post("/cities/validate")
    async def validate_cities(request: Request) -> Response:
        try:
            found = validate_decoder.decode(await request.read() or b"")
        except (msgspec.ValidationError, msgspec.DecodeError) as error:
            return invalid(error)
        return json_response(200, Accepted(len(found)))

    @get("/cities")
    async def list_cities(limit: int = PAGE_SIZE, offset: int = 0) -> Response:
        # BlackSheep converts the query values; the bounds the others declare are checked here.
        if not 1 <= limit <= LIMIT_MAX or offset < 0:
            return json_response(422, {"detail": "limit or offset out of range"})
        items = cities[offset : offset + limit]
        return json_response(200, CityPage(count=len(items), items=items))

    @post("/cities/search")
    async def search_cities(request: Request) -> Response:
        try:
            query = search_decoder.decode(await request.read() or b"")
        except (msgspec.ValidationError, msgspec.DecodeError) as error:
            return invalid(error)
        items = search(cities, by_country, query.country, query.min_population, query.limit)
        return json_response(200, CityPage(count=len(items), items=items))

    @get("/cities/{int:city_id}")
    async def get_city(city_id: int) -> Response:
        city = by_id.get(city_id) if city_id >= 1 else None
        if city is None:
            return json_response(404, {"detail": "city not found"})
        return json_response(200, city)

    return app
