"""Build the compiled modules (`_fastpath` and the one-source ones); the pure ones ship either way.

Two environment variables steer the build:

- MSGSPEC_FASTAPI_NO_EXTENSIONS=1 skips compiling: a pure wheel, tagged py3-none-any.
- MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1 makes a failing C compiler fail the build. Every
  published wheel is built with it, so a wheel can never come out pure by accident.

Without either, a C compiler that fails (or is missing) gives a working pure install and a
warning. That wheel keeps the interpreter's platform tag: the decision comes after the
wheel's tag is fixed, and such a wheel is only ever built locally, by pip, from the sdist.
"""

import os
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

NO_EXTENSIONS = os.environ.get("MSGSPEC_FASTAPI_NO_EXTENSIONS") == "1"
REQUIRE_EXTENSIONS = os.environ.get("MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS") == "1"

if NO_EXTENSIONS and REQUIRE_EXTENSIONS:
    sys.exit(
        "msgspec-fastapi: MSGSPEC_FASTAPI_NO_EXTENSIONS=1 and "
        "MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1 contradict each other"
    )


def report(message):
    print(f"msgspec-fastapi: {message}", file=sys.stderr, flush=True)


# Modules written once in Python and compiled under their plain name from `name_py.py`,
# typed by `name.pxd` beside it; the pure build imports `name_py` itself (see `_select`).
ONE_SOURCE = (
    "_dependencies.executor",
    "_errors.jsonscan",
    "_routing.dispatch",
    "_routing.entry",
)


def one_source(name):
    path = "src/msgspec_fastapi/" + name.replace(".", "/")
    return Extension(f"msgspec_fastapi.{name}", [f"{path}_py.py"])


def extensions():
    if NO_EXTENSIONS:
        return []
    from Cython.Build import cythonize

    return cythonize(
        [
            Extension("msgspec_fastapi._fastpath", ["src/msgspec_fastapi/_fastpath.pyx"]),
            *(one_source(name) for name in ONE_SOURCE),
        ],
        compiler_directives={"language_level": "3"},
    )


# Calls into the interpreter through the GOT rather than the PLT: fewer instructions and
# about 5% fewer instruction-cache misses per request on every route the project's cache
# simulation counts (docs/benchmarks.md, "Build options"). Linux (ELF) only, and only
# where the compiler accepts it.
LINUX_FLAGS = ("-fno-plt",)


def accepted_flags(compiler, flags):
    """The flags among `flags` that `compiler` compiles a C file with, as errors."""
    accepted = []
    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "probe.c")
        with open(source, "w") as probe:
            probe.write("int probe(void) { return 0; }\n")
        for flag in flags:
            try:
                compiler.compile([source], output_dir=folder, extra_postargs=[flag, "-Werror"])
            except CCompilerError:
                continue
            accepted.append(flag)
    return accepted


class OptionalBuildExt(build_ext):
    """Compile `_fastpath`; when the C compiler fails, fall back to the pure twin.

    Cython errors are not caught: they are bugs in the source, not a missing compiler.
    """

    def build_extensions(self):
        if sys.platform.startswith("linux") and self.compiler.compiler_type == "unix":
            flags = accepted_flags(self.compiler, LINUX_FLAGS)
            for extension in self.extensions:
                extension.extra_compile_args = [*extension.extra_compile_args, *flags]
        super().build_extensions()

    def run(self):
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError) as error:
            if REQUIRE_EXTENSIONS:
                report("the C compiler failed and MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1")
                raise
            report(
                f"WARNING: the C compiler failed ({error}). Installing without the "
                "compiled request path: everything works, requests are slower. Install a "
                "C compiler and reinstall to get it."
            )
            self.distribution.fastpath_mode = "pure Python only (the C compiler failed)"
        else:
            self.distribution.fastpath_mode = "compiled (_fastpath)"


class BuildReportingMode(build):
    """Say which request path the build produced, as its last line."""

    def run(self):
        super().run()
        if NO_EXTENSIONS:
            mode = "pure Python only (MSGSPEC_FASTAPI_NO_EXTENSIONS=1)"
        else:
            mode = self.distribution.fastpath_mode
        report(f"request path built: {mode}")


setup(
    ext_modules=extensions(),
    cmdclass={"build": BuildReportingMode, "build_ext": OptionalBuildExt},
)
