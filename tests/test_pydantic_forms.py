"""Form bodies of Pydantic routes on the direct tier.

A route without msgspec types whose body is a form (`Form()`, `File()`, a Pydantic form
model) runs from the dependency plan: the form is parsed as FastAPI's handler parses it
(Starlette's parser, the route's form limits, FastAPI's 400 and 413, its files closed
after the response), and each dependency's form fields are validated at its turn by
FastAPI's own step. Each test compares status, headers and body bytes with the same route
on an APIRouter, and checks FastAPI's solving never ran for ours.
"""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
import pytest
from fastapi import Depends, File, Form, UploadFile
from pydantic_apps import assert_same
from twins import Twin


class Item(pydantic.BaseModel):
    name: str
    price: float


class Login(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    username: str
    password: str = pydantic.Field(min_length=3)


def _form_fields(router: Any) -> None:
    @router.post("/items")
    async def create(
        name: Annotated[str, Form()],
        price: Annotated[float, Form(gt=0)],
        tags: list[str] = Form([]),
    ) -> Item:
        return Item(name=f"{name} {','.join(tags)}", price=price)


@pytest.mark.parametrize(
    "data",
    [
        {"name": "pen", "price": "2.5"},
        {"name": "pen", "price": "2.5", "tags": ["a", "b"]},
        {"name": "pen", "price": "-1"},
        {"price": "x"},
        {},
    ],
    ids=["valid", "list", "out-of-range", "invalid", "empty"],
)
def test_form_fields_are_parsed_and_validated_as_fastapi_does(
    twin: Twin, solved: list[Any], data: dict[str, Any]
) -> None:
    assert_same(twin, solved, _form_fields, "POST", "/items", data=data)


def test_a_body_that_is_not_a_form_is_answered_as_fastapi_does(
    twin: Twin, solved: list[Any]
) -> None:
    assert_same(twin, solved, _form_fields, "POST", "/items", json={"name": "pen"})


def test_a_multipart_body_without_a_boundary_is_fastapis_400(twin: Twin, solved: list[Any]) -> None:
    status, _, _ = assert_same(
        twin,
        solved,
        _form_fields,
        "POST",
        "/items",
        content=b"--x\r\nbroken",
        headers={"content-type": "multipart/form-data"},
    )
    assert status == 400


def _form_model(router: Any) -> None:
    @router.post("/login")
    async def login(form: Annotated[Login, Form()]) -> dict[str, str]:
        return {"user": form.username}


@pytest.mark.parametrize(
    "data",
    [
        {"username": "ann", "password": "secret"},
        {"username": "ann", "password": "no"},
        {"username": "ann", "password": "secret", "extra": "1"},
    ],
    ids=["valid", "too-short", "extra-forbidden"],
)
def test_a_pydantic_form_model_is_validated_as_fastapi_does(
    twin: Twin, solved: list[Any], data: dict[str, str]
) -> None:
    assert_same(twin, solved, _form_model, "POST", "/login", data=data)


def _uploads(router: Any) -> None:
    @router.post("/files")
    async def upload(
        note: Annotated[str, Form()],
        file: Annotated[UploadFile, File()],
        raw: Annotated[bytes | None, File()] = None,
    ) -> Item:
        content = await file.read()
        return Item(name=f"{note} {file.filename} {content.decode()} {raw!r}", price=len(content))


@pytest.mark.parametrize(
    ("data", "files"),
    [
        ({"note": "n"}, {"file": ("a.txt", b"hello")}),
        ({"note": "n"}, {"file": ("a.txt", b"hello"), "raw": ("b.bin", b"\x00\x01")}),
        ({"note": "n"}, {}),
    ],
    ids=["one-file", "two-files", "file-missing"],
)
def test_uploaded_files_reach_the_endpoint_as_in_fastapi(
    twin: Twin, solved: list[Any], data: dict[str, str], files: dict[str, Any]
) -> None:
    assert_same(twin, solved, _uploads, "POST", "/files", data=data, files=files)


async def owner(owner: Annotated[str, Form(min_length=2)]) -> str:
    return owner


def _form_field_in_a_dependency(router: Any) -> None:
    @router.post("/x")
    async def endpoint(name: Annotated[str, Form()], by: Annotated[str, Depends(owner)]) -> Item:
        return Item(name=f"{name} by {by}", price=1)


@pytest.mark.parametrize(
    "data",
    [{"name": "a", "owner": "ann"}, {"name": "a", "owner": "x"}, {"owner": "ann"}],
    ids=["valid", "bad-owner", "name-missing"],
)
def test_a_dependency_taking_a_form_field_gets_it_as_in_fastapi(
    twin: Twin, solved: list[Any], data: dict[str, str]
) -> None:
    assert_same(twin, solved, _form_field_in_a_dependency, "POST", "/x", data=data)
