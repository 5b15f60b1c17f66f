"""Build the compiled request path; the pure twin ships either way."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("msgspec_fastapi._fastpath", ["src/msgspec_fastapi/_fastpath.pyx"])],
        compiler_directives={"language_level": "3"},
    ),
)
