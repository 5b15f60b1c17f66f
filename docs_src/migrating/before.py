from fastapi import APIRouter, FastAPI
from pydantic import BaseModel


class City(BaseModel):
    name: str
    population: int


router = APIRouter(prefix="/cities")


@router.post("")
async def create_city(city: City) -> City:
    return city


@router.get("/{city_id}")
async def get_city(city_id: int) -> City:
    return City(name=f"city {city_id}", population=1000)


app = FastAPI()
app.include_router(router)
