"""Errors: what a failing request gets, worked out only when it fails.

Per request, on failure: `validation` makes FastAPI-shaped 422s from msgspec's errors;
`handlers` hands exceptions raised in a direct-tier route to the application's handlers.
Registration keeps nothing here beyond the error types the plans hold.
"""
