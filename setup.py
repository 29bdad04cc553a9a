"""Build of kbatch's compiled core (Cython 3 over typed memoryviews).

Environment switches:

- ``KBATCH_SANITIZE=1``: compile with ``-fsanitize=address,undefined`` and
  frame pointers, for ``make test-asan``.
- ``KBATCH_DEBUG=1``: ``-O0 -g``, for stepping through the parser in gdb.
"""

import glob
import os
import runpy

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

MODULES = ["_mapguard", "_columns", "_checksums", "_lz4", "_snappy", "_zstd", "_gzip", "_codecs", "_legacy",
           "_records", "_batch", "_kernels", "_encode", "_offsets", "_latest", "_take", "_avro",
           "_protobuf", "_json"]

sanitize = os.environ.get("KBATCH_SANITIZE") == "1"
debug = os.environ.get("KBATCH_DEBUG") == "1"

compile_args = ["-Wall", "-Wno-unused-function", "-Wno-unreachable-code"]
link_args = []
if debug:
    compile_args += ["-O0", "-g"]
else:
    compile_args += ["-O3"]
if sanitize:
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
             "-fno-sanitize-recover=undefined", "-g"]
    compile_args += flags
    link_args += flags

# The fixed-width record columns are listed once, in kbatch/_core/coltable.py:
# their Cython declarations (_coltable.pxd) are generated from it, before
# Cython reads them (rewritten only when they differ, so nothing else rebuilds)
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "kbatch", "_core", "coltable.py"))["write_pxd"]()

extensions = [
    Extension(
        f"kbatch._core.{name}",
        [f"kbatch/_core/{name}.pyx"],
        # the C headers the .pyx files include (_memory.h, ...): a changed
        # header rebuilds the modules, which Cython's own tracking misses
        depends=sorted(glob.glob("kbatch/_core/*.h")),
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
    )
    for name in MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        # Bounds-check directives are set per module, in each .pyx header,
        # only where the one cursor already checks every read.
        compiler_directives={"embedsignature": True},
    ),
)
