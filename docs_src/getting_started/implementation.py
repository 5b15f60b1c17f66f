import msgspec_fastapi

print(msgspec_fastapi.IMPLEMENTATION)  # "compiled" or "pure"
