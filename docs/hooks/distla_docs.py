"""mkdocs hooks for the distla site (see ``hooks:`` in mkdocs.yml).

The version: read from the installed package's metadata (what
``distla.__version__`` reports), never written by hand. It goes into the
site name and the footer, and replaces ``{{ distla_version }}`` in pages.
"""

from __future__ import annotations

from importlib import metadata


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
    return markdown.replace("{{ distla_version }}", config.extra["distla_version"])
