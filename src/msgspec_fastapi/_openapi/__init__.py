"""OpenAPI: msgspec's JSON schemas in the application's document.

Registration and document time only, nothing per request: `schemas` makes the schemas of
bodies, responses, parameters and error models; `body_docs` what a body documents beside
its type; `install` (`install_openapi`) puts them in the document FastAPI generates.
"""
