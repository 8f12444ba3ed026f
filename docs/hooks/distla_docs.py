"""mkdocs hooks for the distla site (see ``hooks:`` in mkdocs.yml).

1. The version: read from the installed package's metadata (what
   ``distla.__version__`` reports), never written by hand. It goes into the
   site name and the footer, and replaces ``{{ distla_version }}`` in pages.

2. Pages still being written. The capability pages in ``PENDING`` are written
   by their owners alongside the code. Until a page exists, its ``nav`` entry
   is dropped and links to it (``[text](lu.md)``, ``[text](../lu.md#x)``) are
   rendered as plain text, so that ``mkdocs build --strict`` stays green; the
   moment the file lands, the nav entry and every link are live (and checked
   by the strict build). Only the pages named here get this treatment: a typo
   anywhere else still fails the build.
"""

from __future__ import annotations

import logging
import re
from importlib import metadata
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.distla")

PENDING = ("lu.md", "batched.md", "fft.md", "multiprocess.md")
_missing: set[str] = set()


def _version() -> str:
    try:
        return metadata.version("distla")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _prune(nav, missing):
    out = []
    for item in nav:
        if isinstance(item, dict):
            (title, target), = item.items()
            if isinstance(target, list):
                target = _prune(target, missing)
                if not target:
                    continue
            elif target in missing:
                continue
            out.append({title: target})
        elif item not in missing:
            out.append(item)
    return out


def on_config(config, **kwargs):
    version = _version()
    config.site_name = f"distla {version}"
    config.copyright = f"distla {version} · Apache-2.0"
    config.extra["distla_version"] = version
    docs = Path(config.docs_dir)
    _missing.clear()
    _missing.update(p for p in PENDING if not (docs / p).exists())
    if _missing:
        log.info("distla: pages not written yet: %s", ", ".join(sorted(_missing)))
        config.nav = _prune(config.nav, _missing)
    return config


def on_page_markdown(markdown, page, config, files, **kwargs):
    markdown = markdown.replace("{{ distla_version }}", config.extra["distla_version"])
    for name in _missing:
        link = re.compile(r"\[([^\]]+)\]\((?:\.\./)?" + re.escape(name) + r"(?:#[^)]*)?\)")
        markdown = link.sub(r"\1", markdown)
    return markdown
