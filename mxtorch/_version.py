"""The package version, in one place: pyproject.toml reads it (``dynamic = ["version"]``),
``mxtorch.__version__`` re-exports it and ``mxtorch --version`` prints it."""

__version__ = "0.1.0"
