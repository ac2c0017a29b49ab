"""The one part of the build that pyproject.toml declares only experimentally: the PDF page walk in
C (jobs/reader/pdf/_walk.c, the file says why). Everything else about the package is in
pyproject.toml; setuptools reads both.

No fused multiply-add, so the walk's arithmetic is Python's to the last bit: the tests hold it to
the Python walk's verdicts.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "jobs.reader.pdf._walk",
            sources=["jobs/reader/pdf/_walk.c"],
            extra_compile_args=["-O2", "-ffp-contract=off", "-Wall", "-Wextra"],
        )
    ]
)
