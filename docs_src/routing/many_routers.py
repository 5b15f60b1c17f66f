import msgspec
from fastapi import APIRouter, FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class User(msgspec.Struct):
    id: int
    name: str


class Order(msgspec.Struct):
    id: int
    user_id: int


users = MsgspecRouter(prefix="/users")
orders = MsgspecRouter(prefix="/orders")
health = APIRouter()


@users.get("/{user_id}")
async def get_user(user_id: int) -> User:
    return User(user_id, "ada")


@orders.get("/{order_id}")
async def get_order(order_id: int) -> Order:
    return Order(order_id, user_id=1)


@health.get("/health")
async def get_health() -> dict[str, str]:
    return {"status": "ok"}


app = FastAPI()
app.include_router(users)  # MsgspecRouters, APIRouters, app routes, mounts: anything
app.include_router(orders)
app.include_router(health)
install_openapi(app, users, orders)
install_dispatch(app)  # once, after including the routers
