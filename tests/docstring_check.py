"""The public docstrings in the form the API reference renders: checks and a converter.

The API reference (docs/api.md) renders docstrings with mkdocstrings' Google
parser (griffe), with the options in mkdocs.yml. What renders badly there:

- Sphinx roles (``:func:`solve```, ``:class:`Cost```): shown as raw text. Write an
  autorefs link to a documented name instead, ``[`solve`][distla.linalg.solve]``,
  or plain code (`` `jnp.linalg.solve` ``) for anything not in the API page.
- A section header griffe does not take as one (``Return:``, ``Args`` without the
  colon, a header with no blank line above it): its entries run on as prose.
- ``Args`` entries that name no parameter, ``Raises`` entries that are not
  ``ExceptionName: text``, and anything else griffe warns about.

Used by tests/test_docstrings.py. As a script, it lists what it finds or rewrites
the roles in place::

    python tests/docstring_check.py                 # every public docstring: problems
    python tests/docstring_check.py --fix FILE ...  # roles -> links or code, in FILEs

``--fix`` resolves each role's target where it is written (``:func:`solve``` in
``distla/linalg/_solve.py`` is ``distla.linalg.solve``); a target that is a
documented public name becomes a link, anything else plain code. Run ``ruff
format`` on the files afterwards and read the diff.
"""

from __future__ import annotations

import ast
import logging
import re
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.md"
ROLE = re.compile(r":(?:py:)?(func|class|meth|mod|attr|exc|data|obj|const):`(~?)([^`]+)`")
SECTION_NAMES = (
    "Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    "Returns?|Yields?|Receives|Raises|Exceptions?|Warns|Warnings?|Examples?|Notes?|"
    "See [Aa]lso|Attributes|Methods|References?|Todo|Deprecated"
)
# A line that reads as a section header but sits in prose: griffe did not take it.
HEADER_IN_PROSE = re.compile(rf"^\s*(?:{SECTION_NAMES})\s*(?:\(.*\))?\s*:?\s*$")
# The headers griffe reads, as the docstrings write them (one form each).
ALLOWED_HEADERS = {
    "Args",
    "Returns",
    "Yields",
    "Raises",
    "Examples",
    "Example",
    "Note",
    "Notes",
    "See also",
    "Attributes",
    "Warning",
}


def mkdocs_options() -> dict:
    """The docstring parser's options, read from mkdocs.yml (one place for them)."""
    text = (ROOT / "mkdocs.yml").read_text()
    block = re.search(r"docstring_options:\n((?:\s{14,}\S.*\n)+)", text)
    options = {}
    for line in block.group(1).splitlines() if block else ():
        key, _, value = line.strip().partition(":")
        options[key] = {"true": True, "false": False}[value.strip()]
    return options


def api_entries() -> dict[str, str]:
    """``documented name -> target path`` of every ``::: target`` in docs/api.md."""
    lines = API.read_text().splitlines()
    entries = {}
    for i, line in enumerate(lines):
        m = re.match(r"^:::\s+([\w.]+)\s*$", line)
        if not m:
            continue
        name = m.group(1)
        for opt in lines[i + 1 :]:
            if opt.strip() and not opt.startswith(" "):
                break
            h = re.match(r"^\s+heading:\s*(\S+)\s*$", opt)
            if h:
                name = h.group(1)
        entries[name] = m.group(1)
    return entries


@cache
def package():
    """distla as griffe reads it statically: what mkdocstrings renders."""
    import griffe

    return griffe.load(
        "distla",
        search_paths=[str(ROOT), *sys.path],
        docstring_parser="google",
        docstring_options=mkdocs_options(),
        resolve_aliases=True,
        resolve_external=False,
    )


def griffe_object(path: str):
    """The griffe object that ``::: path`` renders; None for jnp's own (re-exported) objects."""
    import griffe

    pkg = package()
    rest = path.split(".", 1)[1] if "." in path else ""
    obj = pkg[rest] if rest else pkg
    if getattr(obj, "is_alias", False):
        try:
            obj = obj.final_target
        except griffe.AliasResolutionError:  # jax's objects, not read here
            return None
    return obj if obj.path.startswith("distla") else None


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _members(obj) -> list:
    """``obj`` and, for a class, its public methods and properties with docstrings."""
    found = [obj]
    if getattr(obj, "kind", None) is not None and obj.kind.value == "class":
        for name, member in obj.members.items():
            if not name.startswith("_") and member.docstring is not None:
                found.append(member)
    return found


def problems_of(path: str) -> list[str]:
    """What renders badly in the docstring of the object ``::: path`` renders."""
    import griffe

    out = []
    found = griffe_object(path)
    for obj in _members(found) if found is not None else ():
        where = obj.path
        doc = obj.docstring
        if doc is None:
            out.append(f"{where}: no docstring")
            continue
        for m in ROLE.finditer(doc.value):
            out.append(f"{where}: raw role {m.group(0)}")
        collect = _Collect()
        logger = logging.getLogger("griffe")
        logger.addHandler(collect)
        try:
            sections = griffe.Docstring(doc.value, lineno=doc.lineno, parent=obj).parse(
                "google", **mkdocs_options()
            )
        finally:
            logger.removeHandler(collect)
        out += [f"{where}: {message}" for message in collect.messages]
        for s in sections:
            if s.kind.value == "text" or s.kind.value == "admonition":
                text = s.value if isinstance(s.value, str) else s.value.description
                for line in text.splitlines():
                    if HEADER_IN_PROSE.match(line):
                        out.append(f"{where}: a section header read as prose: {line.strip()!r}")
            if s.kind.value == "returns" and len(s.value) != 1:
                out.append(f"{where}: Returns split into {len(s.value)} entries")
        for line in doc.value.splitlines():
            header = re.match(r"^([A-Z][A-Za-z ]+):\s*$", line)
            if header and header.group(1) not in ALLOWED_HEADERS:
                if re.fullmatch(SECTION_NAMES, header.group(1)):
                    out.append(f"{where}: write {header.group(1)!r} as one of {ALLOWED_HEADERS}")
    return out


def has_args_section(path: str) -> bool:
    obj = griffe_object(path)
    if obj is None:
        return True
    if obj.kind.value == "class":  # a dataclass's fields: its Attributes section
        return True
    params = [p for p in getattr(obj, "parameters", ()) if p.name not in ("self", "cls")]
    if not params or obj.docstring is None:
        return True
    return any(s.kind.value == "parameters" for s in obj.docstring.parsed)


def page_problems(page: Path) -> list[str]:
    """Raw roles in a markdown page (outside code blocks, where they would be code)."""
    out, fenced = [], False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced:
            out += [
                f"{page.relative_to(ROOT)}:{n}: raw role {m.group(0)}" for m in ROLE.finditer(line)
            ]
    return out


# --------------------------------------------------------------------------
# The converter
# --------------------------------------------------------------------------


def _module_of(path: Path) -> str:
    rel = path.resolve().relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "kernels":
        parts = ["distla", *parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _public_module(module: str) -> str:
    """The public namespace a private module's names are exported from."""
    parts = module.split(".")
    keep = []
    for p in parts:
        if p.startswith("_"):
            break
        keep.append(p)
    return ".".join(keep) or "distla"


def link_target(target: str, module: str, documented: dict[str, str]) -> str | None:
    """The API page's identifier for ``target`` written in ``module``, or None."""
    target = target.lstrip(".").removesuffix("()")
    home = _public_module(module)
    candidates = [target, f"{home}.{target}", f"distla.{target}"]
    for scope in ("distla.linalg", "distla.fft"):
        candidates.append(f"{scope}.{target}")
    for name in candidates:
        if name in documented:
            return documented[name]
    return None


def convert_text(text: str, module: str, documented: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        tilde, target = m.group(2), m.group(3)
        shown = target.rsplit(".", 1)[-1] if tilde else target
        ident = link_target(target, module, documented)
        if ident is None:
            return f"`{shown}`"
        return f"[`{shown}`][{ident}]"

    return ROLE.sub(repl, text)


def convert_file(path: Path, documented: dict[str, str]) -> int:
    """Rewrite the roles in ``path``'s docstrings and comments; the number rewritten."""
    text = path.read_text()
    ast.parse(text)  # a file that does not parse is left alone (raises)
    module = _module_of(path)
    count = len(ROLE.findall(text))
    if count:
        path.write_text(convert_text(text, module, documented))
    return count


def main(argv: list[str]) -> int:
    if argv[:1] == ["--fix"]:
        documented = api_entries()
        for name in argv[1:]:
            n = convert_file(Path(name), documented)
            print(f"{name}: {n} roles rewritten")
        return 0
    found = []
    for name, target in api_entries().items():
        found += problems_of(target)
        if not has_args_section(target):
            found.append(f"{name}: parameters but no Args section")
    for page in sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]:
        found += page_problems(page)
    print("\n".join(found) or "no problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
