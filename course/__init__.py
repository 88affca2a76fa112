"""The course runtime: what every notebook imports, installed as one versioned package
(course/authoring/runtime_package.py makes its wheel)."""

from course._version import RUNTIME_VERSION as __version__  # noqa: F401 - the notebooks' pin
