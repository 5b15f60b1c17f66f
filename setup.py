"""Build the compiled modules (`_fastpath` and the one-source ones); the pure ones ship either way.

Three environment variables steer the build:

- MSGSPEC_FASTAPI_NO_EXTENSIONS=1 skips compiling: a pure wheel, tagged py3-none-any.
- MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS=1 makes a failing C compiler fail the build. Every
  published wheel is built with it, so a wheel can never come out pure by accident.
- MSGSPEC_FASTAPI_PGO=1 makes a profile-guided build with GCC: built instrumented, trained
  by `build_support/train.py` (which needs the package's dependencies: the build backend
  asks for them), built again from the profile; a failing training run fails the build.
  With another compiler the build is the usual one, and says so.

Without either of the first two, a C compiler that fails (or is missing) gives a working
pure install and a warning. That wheel keeps the interpreter's platform tag: the decision
comes after the wheel's tag is fixed, and such a wheel is only ever built locally, by pip,
from the sdist.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

NO_EXTENSIONS = os.environ.get("MSGSPEC_FASTAPI_NO_EXTENSIONS") == "1"
REQUIRE_EXTENSIONS = os.environ.get("MSGSPEC_FASTAPI_REQUIRE_EXTENSIONS") == "1"
PGO = os.environ.get("MSGSPEC_FASTAPI_PGO") == "1"

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
    forget_if_stale(f"{path}_py.c", f"{path}.pxd")
    return Extension(f"msgspec_fastapi.{name}", [f"{path}_py.py"])


def forget_if_stale(c_file, pxd):
    """Remove `c_file` where it is older than `pxd`. Deciding what to regenerate, cythonize
    looks for a `name_py.py`'s declarations in `name_py.pxd`, not in the `name.pxd` it
    compiles it with, so an edit of the .pxd alone would leave the old C file in use."""
    if os.path.exists(c_file) and os.path.getmtime(c_file) < os.path.getmtime(pxd):
        os.remove(c_file)


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


# The training run of a profile-guided build, and what it runs per request kind. The
# profile moves the code no request ran out of the hot functions: 11% to 12% fewer
# instruction-cache misses per request on every route the project's cache simulation
# counts (docs/benchmarks.md, "A profile-guided build").
TRAINER = os.path.join("build_support", "train.py")
TRAINING_REQUESTS = "2000"
PROFILE_USE_FLAGS = ("-fprofile-partial-training", "-Wno-missing-profile")


def is_gcc(compiler):
    """Whether `compiler` is GCC, whose profiles are read as the training run writes them
    (Clang's need merging by llvm-profdata first; MSVC's PGO is another scheme)."""
    if compiler.compiler_type != "unix":
        return False
    try:
        version = subprocess.run(
            [compiler.compiler_so[0], "--version"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return "Free Software Foundation" in version


class OptionalBuildExt(build_ext):
    """Compile `_fastpath`; when the C compiler fails, fall back to the pure twin.

    Cython errors are not caught: they are bugs in the source, not a missing compiler.
    """

    def build_extensions(self):
        if sys.platform.startswith("linux") and self.compiler.compiler_type == "unix":
            flags = accepted_flags(self.compiler, LINUX_FLAGS)
            for extension in self.extensions:
                extension.extra_compile_args = [*extension.extra_compile_args, *flags]
        if not PGO:
            super().build_extensions()
        elif is_gcc(self.compiler):
            self.build_trained()
        else:
            report("MSGSPEC_FASTAPI_PGO=1, but the C compiler is not GCC: built without a profile")
            super().build_extensions()

    def build_trained(self):
        """Built instrumented, trained, and built again with the profile."""
        profile = os.path.abspath(os.path.join(self.build_temp, "profile"))
        shutil.rmtree(profile, ignore_errors=True)
        usual = [
            (extension, extension.extra_compile_args, extension.extra_link_args)
            for extension in self.extensions
        ]
        # Counters updated atomically where the target has atomics: the training's
        # threadpool runs compiled code on other threads.
        generate = [
            f"-fprofile-generate={profile}",
            *accepted_flags(self.compiler, ("-fprofile-update=prefer-atomic",)),
        ]
        use = [f"-fprofile-use={profile}", *accepted_flags(self.compiler, PROFILE_USE_FLAGS)]
        # Each pass compiles every module again: the objects of the other pass are not
        # out of date by their times.
        self.force = True
        for extension, compile_args, link_args in usual:
            extension.extra_compile_args = [*compile_args, *generate]
            extension.extra_link_args = [*link_args, *generate]
        super().build_extensions()
        self.train()
        for extension, compile_args, link_args in usual:
            extension.extra_compile_args = [*compile_args, *use]
            extension.extra_link_args = link_args
        super().build_extensions()
        report(f"profile-guided build, trained by {TRAINER}")

    def train(self):
        """The training run, on a copy of the package with the instrumented modules in
        it (where they are built is not always where the package's sources are)."""
        with tempfile.TemporaryDirectory() as folder:
            package = os.path.join(folder, "msgspec_fastapi")
            shutil.copytree(
                os.path.join("src", "msgspec_fastapi"),
                package,
                ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"),
            )
            for extension in self.extensions:
                built = self.get_ext_fullpath(extension.name)
                parts = extension.name.split(".")[1:-1]
                shutil.copy(built, os.path.join(package, *parts, os.path.basename(built)))
            environ = {**os.environ, "PYTHONPATH": folder}
            environ.pop("MSGSPEC_FASTAPI_PURE", None)
            command = [sys.executable, os.path.abspath(TRAINER), "--requests", TRAINING_REQUESTS]
            subprocess.run(command, env=environ, cwd=folder, check=True)

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
