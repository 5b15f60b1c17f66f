"""Build the compiled request path; the pure twin ships either way."""

from setuptools import Extension, setup

setup(
    ext_modules=[Extension("msgspec_fastapi._fastpath", ["src/msgspec_fastapi/_fastpath.pyx"])],
)
