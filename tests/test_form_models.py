"""Form models: `Annotated[Model, Form()]` with a Struct (TypedDict, dataclass), parsed
from urlencoded and multipart bodies as FastAPI parses a Pydantic form model.

Form routes run on the delegated tier (FastAPI parses the form's way, the twin gathers
it into the model); every test runs against both twins.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from typing import Annotated, Any, NotRequired, TypedDict

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, Body, Depends, FastAPI, File, Form, Header, Query, UploadFile
from fastapi.testclient import TestClient
from openapi_spec_validator import validate
from starlette.datastructures import UploadFile as StarletteUploadFile
from support import client_for
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi

HAS_FORM_LIMITS = "form_limits" in inspect.signature(APIRouter.__init__).parameters
needs_form_limits = pytest.mark.skipif(not HAS_FORM_LIMITS, reason="FastAPI < 0.165")
# FastAPI 0.142 kept empty strings as values; form models follow 0.165 on every version.
needs_0165_forms = pytest.mark.skipif(not HAS_FORM_LIMITS, reason="FastAPI < 0.165")


class Login(msgspec.Struct):
    username: str
    age: int = 30
    tags: list[str] = []
    remember: bool = False


class Renamed(msgspec.Struct, rename="kebab"):
    user_name: str
    page_size: int = 10


class Strict(msgspec.Struct, forbid_unknown_fields=True):
    username: str


class Upload(msgspec.Struct):
    document: UploadFile
    extras: list[UploadFile] = []
    note: str = "none"


class LoginDict(TypedDict):
    username: str
    age: int


@dataclasses.dataclass
class LoginData:
    username: str
    age: int = 30


class Nested(msgspec.Struct):
    login: Login


class PydanticLogin(pydantic.BaseModel):
    username: str
    age: int = 30
    tags: list[str] = []
    remember: bool = False


def form_router(twin: Twin, **options: Any) -> MsgspecRouter:
    """A router with a /login route taking a `Login` form, echoing it."""
    router = twin.router_class(**options)

    @router.post("/login")
    async def login(data: Annotated[Login, Form()]) -> Login:
        return data

    return router


def login_client(twin: Twin, **app_options: Any) -> TestClient:
    return client_for(form_router(twin), **app_options)


def fastapi_login_client() -> TestClient:
    app = FastAPI()

    @app.post("/login")
    async def login(data: Annotated[PydanticLogin, Form()]) -> PydanticLogin:
        return data

    return TestClient(app)


URLENCODED = {"content-type": "application/x-www-form-urlencoded"}


def test_urlencoded_form_fills_the_model(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", data={"username": "ada", "age": "36", "remember": "true"})

    assert response.status_code == 200
    assert response.json() == {"username": "ada", "age": 36, "tags": [], "remember": True}


def test_multipart_form_fills_the_model(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", files={"username": (None, "ada"), "age": (None, "36")})

    assert response.status_code == 200
    assert response.json() == {"username": "ada", "age": 36, "tags": [], "remember": False}


def test_form_route_runs_on_the_delegated_tier(twin: Twin) -> None:
    router = form_router(twin)

    assert [route.tier for route in router.routes] == ["delegated"]


def test_list_field_is_filled_from_repeated_keys(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", content=b"username=a&tags=x&tags=y", headers=URLENCODED)

    assert response.json()["tags"] == ["x", "y"]


def test_scalar_field_takes_the_last_value_of_a_repeated_key(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post(
        "/login", content=b"username=a&username=b&age=1&age=2", headers=URLENCODED
    )

    assert response.json()["username"] == "b"
    assert response.json()["age"] == 2


def test_defaults_apply_to_absent_fields(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", data={"username": "ada"})

    assert response.json() == {"username": "ada", "age": 30, "tags": [], "remember": False}


def test_empty_string_is_absent_so_the_default_applies(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", content=b"username=ada&age=", headers=URLENCODED)

    assert response.status_code == 200
    assert response.json()["age"] == 30


def test_empty_string_for_a_required_field_is_missing(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", content=b"username=", headers=URLENCODED)

    assert response.status_code == 422
    assert response.json()["detail"] == [
        {"type": "missing", "loc": ["body", "username"], "msg": "Field required", "input": {}}
    ]


def test_empty_strings_inside_a_list_are_kept_as_fastapi_keeps_them(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", content=b"username=a&tags=&tags=z", headers=URLENCODED)

    assert response.json()["tags"] == ["", "z"]


def test_renamed_fields_are_read_under_their_encoded_names(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/renamed")
    async def renamed(data: Annotated[Renamed, Form()]) -> Renamed:
        return data

    response = client_for(router).post("/renamed", data={"user-name": "ada", "page-size": "5"})

    assert response.json() == {"user-name": "ada", "page-size": 5}


def test_typed_dict_and_dataclass_form_models_work_too(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/dict")
    async def as_dict(data: Annotated[LoginDict, Form()]) -> dict[str, Any]:
        return dict(data)

    @router.post("/dataclass")
    async def as_dataclass(data: Annotated[LoginData, Form()]) -> dict[str, Any]:
        return dataclasses.asdict(data)

    client = client_for(router)

    assert client.post("/dict", data={"username": "a", "age": "1"}).json() == {
        "username": "a",
        "age": 1,
    }
    assert client.post("/dataclass", data={"username": "a"}).json() == {
        "username": "a",
        "age": 30,
    }


def test_missing_field_is_a_422_at_its_body_key_with_the_received_form(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", data={"age": "5"})

    assert response.status_code == 422
    assert response.json()["detail"] == [
        {
            "type": "missing",
            "loc": ["body", "username"],
            "msg": "Field required",
            "input": {"age": "5"},
        }
    ]


def test_invalid_value_is_a_422_at_its_body_key(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", data={"username": "a", "age": "old"})

    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "age"]
    assert error["input"] == "old"


def test_every_missing_and_invalid_field_gets_its_own_error(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", data={"age": "old", "remember": "perhaps"})

    locs = [error["loc"] for error in response.json()["detail"]]
    assert locs == [["body", "username"], ["body", "age"], ["body", "remember"]]


@needs_0165_forms
def test_errors_are_located_as_fastapis_for_a_pydantic_form_model(twin: Twin) -> None:
    ours, theirs = login_client(twin), fastapi_login_client()
    bodies = [
        b"",
        b"age=5",
        b"username=&age=",
        b"username=a&age=x",
        b"age=x&remember=maybe&tags=1",
        b"username=a&username=&age=3",
    ]
    for body in bodies:
        mine = ours.post("/login", content=body, headers=URLENCODED)
        fastapi = theirs.post("/login", content=body, headers=URLENCODED)
        assert mine.status_code == fastapi.status_code, body
        if mine.status_code == 422:
            assert [e["loc"] for e in mine.json()["detail"]] == [
                e["loc"] for e in fastapi.json()["detail"]
            ], body
        else:
            assert mine.json() == fastapi.json(), body


def test_values_are_converted_with_lax_rules(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", data={"username": "a", "age": "7", "remember": "1"})

    assert response.json()["age"] == 7
    assert response.json()["remember"] is True


def test_unknown_field_is_a_422_when_the_model_forbids_unknown_fields(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/strict")
    async def strict(data: Annotated[Strict, Form()]) -> Strict:
        return data

    response = client_for(router).post("/strict", data={"username": "a", "other": "b"})

    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "other"]
    assert error["input"] == "b"


def test_repeated_unknown_field_is_reported_with_every_value(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/strict")
    async def strict(data: Annotated[Strict, Form()]) -> Strict:
        return data

    client = client_for(router)
    response = client.post("/strict", content=b"username=a&o=1&o=2", headers=URLENCODED)

    [error] = response.json()["detail"]
    assert (error["loc"], error["input"]) == (["body", "o"], ["1", "2"])


def test_unknown_field_is_ignored_by_default(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", data={"username": "a", "other": "b"})

    assert response.status_code == 200


def test_json_sent_to_a_form_route_is_a_422_for_the_missing_fields(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", json={"username": "a"})

    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "username"]]


def upload_router(twin: Twin) -> tuple[MsgspecRouter, list[Upload]]:
    router = twin.router_class()
    seen: list[Upload] = []

    @router.post("/upload")
    async def upload(data: Annotated[Upload, Form()]) -> dict[str, Any]:
        seen.append(data)
        return {
            "document": [data.document.filename, (await data.document.read()).decode()],
            "extras": [file.filename for file in data.extras],
            "note": data.note,
        }

    return router, seen


def test_upload_file_field_receives_the_uploaded_file(twin: Twin) -> None:
    router, seen = upload_router(twin)

    response = client_for(router).post("/upload", files={"document": ("a.txt", b"hello")})

    assert response.json() == {"document": ["a.txt", "hello"], "extras": [], "note": "none"}
    assert isinstance(seen[0].document, UploadFile)


def test_list_of_upload_files_receives_every_file_of_the_key(twin: Twin) -> None:
    router, _ = upload_router(twin)
    files = [
        ("document", ("a.txt", b"1")),
        ("extras", ("b.txt", b"2")),
        ("extras", ("c.txt", b"3")),
        ("note", (None, "two")),
    ]

    response = client_for(router).post("/upload", files=files)

    assert response.json() == {
        "document": ["a.txt", "1"],
        "extras": ["b.txt", "c.txt"],
        "note": "two",
    }


class StarletteUpload(msgspec.Struct):
    document: StarletteUploadFile


def test_starlettes_upload_file_class_works_as_a_field_type(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/upload")
    async def upload(data: Annotated[StarletteUpload, Form()]) -> str:
        return str(data.document.filename)

    response = client_for(router).post("/upload", files={"document": ("a.txt", b"1")})

    assert response.json() == "a.txt"


def test_text_for_an_upload_file_field_is_a_422(twin: Twin) -> None:
    router, _ = upload_router(twin)

    response = client_for(router).post("/upload", files={"document": (None, "not a file")})

    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "document"]
    assert "Expected UploadFile" in error["msg"]


def test_file_for_a_text_field_is_a_422(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", files={"username": ("u.txt", b"abc")})

    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "username"]]


def multipart(*parts: bytes) -> tuple[bytes, dict[str, str]]:
    """A multipart body of raw parts (headers, blank line, content), and its header."""
    body = b"".join(b"--xx\r\n" + part + b"\r\n" for part in parts) + b"--xx--\r\n"
    return body, {"content-type": "multipart/form-data; boundary=xx"}


DOCUMENT_PART = b'Content-Disposition: form-data; name="document"; filename="a.txt"\r\n\r\n1'


def test_empty_file_input_is_absent(twin: Twin) -> None:
    router, _ = upload_router(twin)
    # What a browser sends for a file input left empty: no filename, no content.
    empty = b'Content-Disposition: form-data; name="extras"; filename=""\r\n\r\n'
    body, headers = multipart(DOCUMENT_PART, empty)

    response = client_for(router).post("/upload", content=body, headers=headers)

    assert response.status_code == 200
    assert response.json()["extras"] == []


def test_empty_file_input_for_a_required_file_is_missing(twin: Twin) -> None:
    router, _ = upload_router(twin)
    empty = b'Content-Disposition: form-data; name="document"; filename=""\r\n\r\n'
    body, headers = multipart(empty)

    response = client_for(router).post("/upload", content=body, headers=headers)

    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "document"]]


def test_form_files_are_closed_after_the_response(twin: Twin) -> None:
    router, seen = upload_router(twin)

    client_for(router).post("/upload", files={"document": ("a.txt", b"hello")})

    assert seen[0].document.file.closed


def test_body_over_max_body_size_is_a_413(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/login", max_body_size=64)
    async def login(data: Annotated[Login, Form()]) -> Login:
        return data

    client = client_for(router)

    assert client.post("/login", data={"username": "a"}).status_code == 200
    assert client.post("/login", data={"username": "a" * 100}).status_code == 413
    too_big = client.post("/login", files={"username": (None, "a" * 100)})
    assert too_big.status_code == 413


def test_malformed_multipart_is_a_400_with_fastapis_detail(twin: Twin) -> None:
    client = login_client(twin)
    headers = {"content-type": "multipart/form-data"}

    response = client.post("/login", content=b"garbage", headers=headers)

    assert response.status_code == 400
    assert (
        response.json()
        == fastapi_login_client().post("/login", content=b"garbage", headers=headers).json()
    )


def test_truncated_multipart_is_a_4xx_not_a_500(twin: Twin) -> None:
    client = login_client(twin)
    headers = {"content-type": "multipart/form-data; boundary=xx"}
    body = b'--xx\r\nContent-Disposition: form-data; name="username"\r\n\r\nada'

    response = client.post("/login", content=body, headers=headers)
    fastapi = fastapi_login_client().post("/login", content=body, headers=headers)

    assert response.status_code == fastapi.status_code
    assert 400 <= response.status_code < 500


def test_too_many_fields_is_a_400_with_starlettes_defaults(twin: Twin) -> None:
    client = login_client(twin)

    response = client.post("/login", content=b"username=a" + b"&x=1" * 1000, headers=URLENCODED)

    assert response.status_code == 400
    assert response.json() == {"detail": "Too many fields. Maximum number of fields is 1000."}


@needs_form_limits
def test_route_form_limits_apply_as_in_fastapi(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/login", form_limits={"max_fields": 2})
    async def login(data: Annotated[Login, Form()]) -> Login:
        return data

    client = client_for(router)

    assert client.post("/login", data={"username": "a", "age": "1"}).status_code == 200
    response = client.post("/login", data={"username": "a", "age": "1", "tags": "t"})
    assert response.status_code == 400
    assert response.json() == {"detail": "Too many fields. Maximum number of fields is 2."}


@needs_form_limits
def test_router_and_app_form_limits_apply_as_in_fastapi(twin: Twin) -> None:
    by_router = client_for(form_router(twin, form_limits={"max_fields": 1}))
    by_app = login_client(twin, form_limits={"max_fields": 1})

    for client in (by_router, by_app):
        response = client.post("/login", data={"username": "a", "age": "1"})
        assert response.status_code == 400
        assert response.json() == {"detail": "Too many fields. Maximum number of fields is 1."}


@needs_form_limits
def test_route_form_limits_override_the_app_ones(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/login", form_limits={"max_fields": 5})
    async def login(data: Annotated[Login, Form()]) -> Login:
        return data

    client = client_for(router, form_limits={"max_fields": 1})

    assert client.post("/login", data={"username": "a", "age": "1"}).status_code == 200


@needs_form_limits
def test_too_many_files_and_a_part_too_large_are_400s(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/upload", form_limits={"max_files": 1, "max_part_size": 8})
    async def upload(data: Annotated[Upload, Form()]) -> str:
        return data.note

    client = client_for(router)
    two_files = [("document", ("a.txt", b"1")), ("extras", ("b.txt", b"2"))]

    assert client.post("/upload", files=two_files).status_code == 400
    long_note = {"document": ("a.txt", b"1"), "note": (None, "x" * 9)}
    assert client.post("/upload", files=long_note).status_code == 400


class Paging(msgspec.Struct):
    page: int = 1


def current_user(x_user: Annotated[str, Header()]) -> str:
    return x_user


def test_form_model_beside_query_params_models_and_dependencies(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/login")
    async def login(
        data: Annotated[Login, Form()],
        paging: Annotated[Paging, Query()],
        user: Annotated[str, Depends(current_user)],
        verbose: bool = False,
    ) -> dict[str, Any]:
        return {"name": data.username, "page": paging.page, "user": user, "verbose": verbose}

    client = client_for(router)
    response = client.post(
        "/login?page=3&verbose=true", data={"username": "ada"}, headers={"x-user": "root"}
    )

    assert response.json() == {"name": "ada", "page": 3, "user": "root", "verbose": True}
    failed = client.post("/login?page=x&verbose=maybe", data={}, headers={"x-user": "root"})
    assert [e["loc"] for e in failed.json()["detail"]] == [
        ["query", "verbose"],
        ["query", "page"],
        ["body", "username"],
    ]


def test_form_model_with_a_msgspec_json_body_is_refused_naming_both() -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match=r"login\(\): parameter 'data'.*'extra'"):

        @router.post("/login")
        async def login(data: Annotated[Login, Form()], extra: Annotated[Login, Body()]) -> None:
            """Refused."""


def test_form_model_field_of_a_nested_struct_is_refused_naming_it() -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match=r"'data'.*field 'login'"):

        @router.post("/nested")
        async def nested(data: Annotated[Nested, Form()]) -> None:
            """Refused."""


def test_struct_as_file_is_still_refused() -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match="form models"):

        @router.post("/file")
        async def file(data: Annotated[Login, File()]) -> None:
            """Refused."""


def test_without_python_multipart_registration_fails_as_fastapis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "python_multipart", None)
    monkeypatch.setitem(sys.modules, "multipart", None)
    with pytest.raises(RuntimeError) as fastapi_error:

        @APIRouter().post("/login")
        async def pydantic_login(data: Annotated[PydanticLogin, Form()]) -> None:
            """FastAPI's own check."""

    with pytest.raises(RuntimeError) as our_error:

        @MsgspecRouter().post("/login")
        async def login(data: Annotated[Login, Form()]) -> None:
            """The same check."""

    assert str(our_error.value) == str(fastapi_error.value)


def documented(router: MsgspecRouter) -> dict[str, Any]:
    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = app.openapi()
    validate(document)
    return document


def test_form_model_is_documented_as_an_urlencoded_body(twin: Twin) -> None:
    document = documented(form_router(twin))

    operation = document["paths"]["/login"]["post"]
    [(media_type, content)] = operation["requestBody"]["content"].items()
    assert media_type == "application/x-www-form-urlencoded"
    assert operation["requestBody"]["required"] is True
    schema = document["components"]["schemas"][content["schema"]["$ref"].rsplit("/", 1)[1]]
    assert schema["required"] == ["username"]
    assert schema["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "default": [],
    }
    assert "422" in operation["responses"]


def test_form_model_with_files_is_documented_as_multipart(twin: Twin) -> None:
    router, _ = upload_router(twin)
    document = documented(router)

    content = document["paths"]["/upload"]["post"]["requestBody"]["content"]
    assert list(content) == ["multipart/form-data"]
    name = content["multipart/form-data"]["schema"]["$ref"].rsplit("/", 1)[1]
    properties = document["components"]["schemas"][name]["properties"]
    file_schema = {"type": "string", "contentMediaType": "application/octet-stream"}
    assert properties["document"] == file_schema
    assert properties["extras"] == {"type": "array", "items": file_schema, "default": []}


def test_form_model_beside_fastapis_own_form_parameter_is_refused_naming_the_endpoint() -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match=r"login\(\).*form model"):

        @router.post("/login")
        async def login(data: Annotated[Login, Form()], token: Annotated[str, Form()]) -> None:
            """Refused."""

    assert router.routes == []


def login_form_dependency(data: Annotated[Login, Form()]) -> str:
    return data.username


def test_form_model_in_a_dependency_is_refused_naming_the_dependency() -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match=r"login_form_dependency\(\), parameter 'data'"):

        @router.post("/login")
        async def login(name: Annotated[str, Depends(login_form_dependency)]) -> None:
            """Refused."""


def paging_dependency(paging: Annotated[Paging, Query()]) -> int:
    return paging.page


def test_form_model_beside_a_dependency_taking_a_query_model(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/login")
    async def login(
        data: Annotated[Login, Form()], page: Annotated[int, Depends(paging_dependency)]
    ) -> dict[str, Any]:
        return {"name": data.username, "page": page}

    client = client_for(router)

    assert client.post("/login?page=2", data={"username": "ada"}).json() == {
        "name": "ada",
        "page": 2,
    }
    failed = client.post("/login?page=x", data={})
    assert [e["loc"] for e in failed.json()["detail"]] == [["query", "page"], ["body", "username"]]


@pytest.mark.parametrize(
    ("sent", "value"),
    [("on", True), ("yes", True), ("1", True), ("off", False), ("n", False)],
)
def test_boolean_field_reads_what_fastapi_reads_such_as_a_checkbox_on(
    twin: Twin, sent: str, value: bool
) -> None:
    data = {"username": "ada", "remember": sent}
    ours = login_client(twin).post("/login", data=data)
    theirs = fastapi_login_client().post("/login", data=data)
    assert ours.json()["remember"] is theirs.json()["remember"] is value


@pytest.mark.parametrize(("sent", "status"), [("1_0", 200), ("+5", 200), ("1e3", 422)])
def test_int_field_accepts_exactly_what_fastapi_accepts(twin: Twin, sent: str, status: int) -> None:
    data = {"username": "ada", "age": sent}
    ours = login_client(twin).post("/login", data=data)
    theirs = fastapi_login_client().post("/login", data=data)
    assert ours.status_code == theirs.status_code == status
    if status == 200:
        assert ours.json()["age"] == theirs.json()["age"]
    else:
        assert ours.json()["detail"][0]["loc"] == ["body", "age"]
        assert ours.json()["detail"][0]["input"] == sent


class Blob(msgspec.Struct):
    data: bytes = b""


def test_bytes_field_takes_the_text_as_utf8(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/blob")
    async def blob(form: Annotated[Blob, Form()]) -> str:
        return repr(form.data)

    assert client_for(router).post("/blob", data={"data": "tést"}).json() == repr("tést".encode())


class Partial(TypedDict, total=True):
    username: str
    nickname: NotRequired[str]


def test_typed_dict_with_a_not_required_field_gives_a_422_not_a_500(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/signup")
    async def signup(form: Annotated[Partial, Form()]) -> dict[str, Any]:
        return dict(form)

    client = client_for(router)
    assert client.post("/signup", data={"username": "a", "nickname": "b"}).status_code == 200
    response = client.post("/signup", data={"nickname": "b"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "username"]


def test_missing_field_error_shows_the_whole_form_received(twin: Twin) -> None:
    response = login_client(twin).post("/login", data={"other": "1", "age": "3"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "username"]
    assert error["input"] == {"other": "1", "age": "3"}


class Positional(msgspec.Struct, array_like=True):
    username: str


def test_array_like_model_is_refused_at_registration() -> None:
    router = MsgspecRouter()
    with pytest.raises(TypeError, match=r"'form'.*array_like"):

        @router.post("/login")
        async def login(form: Annotated[Positional, Form()]) -> None: ...
