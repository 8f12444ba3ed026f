"""mkdocs hooks for the distla site (see ``hooks:`` in mkdocs.yml).

The version: read from the installed package's metadata (what
``distla.__version__`` reports), never written by hand. It goes into the
site name and the footer, and replaces ``{{ distla_version }}`` in pages.

A Sphinx role (``:func:`solve```) in a page is a warning, which fails the strict
build: mkdocs shows it as raw text. Write a link (``[`solve`][distla.linalg.solve]``)
or code. tests/test_docstrings.py checks the docstrings the API page renders.
"""

from __future__ import annotations

import logging
import re
from importlib import metadata

_log = logging.getLogger("mkdocs.hooks.distla")
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|exc|data|obj|const):`[^`]+`")
FENCE = re.compile(r"^\s*(```|~~~)")


def raw_roles(markdown: str) -> list[str]:
    """The Sphinx roles in ``markdown`` outside fenced code blocks."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            found += ROLE.findall(line)
    return found


def _version() -> str:
    try:
        return metadata.version("distla")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def on_config(config, **kwargs):
    version = _version()
    config.site_name = f"distla {version}"
    config.copyright = f"distla {version} · Apache-2.0"
    config.extra["distla_version"] = version
    return config


def on_page_markdown(markdown, page, config, files, **kwargs):
    for role in raw_roles(markdown):
        _log.warning("%s: a raw Sphinx role %s; write a link or code", page.file.src_uri, role)
    return markdown.replace("{{ distla_version }}", config.extra["distla_version"])
