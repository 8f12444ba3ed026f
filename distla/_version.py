"""The version of distla: written here and nowhere else.

``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``), ``distla.__version__``
imports it, and the docs read it from the installed package's metadata.
"""

__version__ = "0.1.0"
