"""What users read cites only public names, and the library stays on public jax.

Cheap text checks over the repository (no jax, no compile): docs, README and
benchmarks name no private distla module (``distla._x``, ``distla.linalg._x``,
``distla.fft._x``) and no file under ``distla/_core``, ``distla/linalg/_x.py``
or ``distla/fft/_x.py``; no module of the library or the kernels imports
``jax._src`` outside the allow-list below (each entry with its reason); no
issue or item numbers in code, docs, benchmarks or tests; no function of the
library or the kernels longer than ``MAX_LINES`` lines of code (its docstring not
counted) unless a comment in it says why it must be one piece; the import graph
goes down the layers with no cycle; no module outside ``distla/_core`` reads an
operand's mesh (``operand_mesh``, ``mesh_of``): the route resolves it once and
hands it down in the plan.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Private names as users would read them: dotted module paths and file paths.
PRIVATE = re.compile(
    r"distla\.(?:_[a-z]|linalg\._|fft\._)|distla/(?:_core/|linalg/_|fft/_)|distla/_[a-z][a-z_]*\.py"
)
# Modules that import jax._src, and why (jax offers no public equivalent).
JAX_SRC_ALLOWED = {
    # cholesky_p: LAPACK's potrf alone. jax's public cholesky (lax.linalg and jnp.linalg)
    # masks the factor with tril, whose iota mask is loop-invariant: inside inverse
    # iteration's loop XLA hoists it to the program's start and holds it there
    # (docs/memory.md, the generalized eigh), and the solve that follows reads only the
    # lower triangle. Present in every jax distla accepts (0.10.2 to 0.11.x).
    "kernels/tridiagonal_vectors.py",
    # get_axis_env: the mesh axes a surrounding vmap(spmd_axis_name=...) took on
    # an Explicit mesh; shard_map reads the same field and jax has no public query.
    # trace_state_clean: whether a trace runs while the operands at hand are
    # concrete (a jitted function closing over them); no public query either.
    "distla/_core/mesh.py",
    # the CPU lowering rules of jax's collective primitives (mlir registry, the primitives
    # in lax.parallel, the MLIR bindings): jax has no public hook to give each collective
    # its own channel id, which XLA:CPU's rendezvous needs (_core/channels.py says why).
    "distla/_core/channels.py",
}
# Benchmarks that time or label an internal step import its private module;
# they are measurement code, not something users call.
PRIVATE_IMPORT_ALLOWED = {
    "benchmarks/bench_mixed.py",  # times the refinement loop apart from the factorisation
    "benchmarks/bench_qr.py",  # labels each row with the QR kernel the call picked
    "benchmarks/bench_spectral.py",  # times each QDWH and divide-and-conquer step alone
    "benchmarks/bench_geneig.py",  # counts the divide levels and leaves each call ran
}
NUMBERS = re.compile(r"[Ii]ssue [0-9]|\bitem [0-9]")


def user_facing() -> list[Path]:
    files = [ROOT / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "benchmarks").glob("*.py"))
    return files


def library() -> list[Path]:
    return sorted((ROOT / "distla").rglob("*.py")) + sorted((ROOT / "kernels").glob("*.py"))


def hits(path: Path, pattern: re.Pattern) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if pattern.search(line)
    ]


def test_patterns_catch_what_they_should():
    assert PRIVATE.search("see `distla._core.mesh.fitting_spec`")
    assert PRIVATE.search("see ``distla.linalg._batched.vmap_rule``")
    assert PRIVATE.search("(`distla/fft/_route.py`)")
    assert PRIVATE.search("(distla/_refine.py)")
    assert not PRIVATE.search("distla.linalg.solve, distla.fft.fftn, distla.__version__")
    assert NUMBERS.search("# issue 16, item 3") and not NUMBERS.search("items of a list")


def test_docs_readme_and_benchmarks_cite_only_public_names():
    found = [h for f in user_facing() for h in hits(f, PRIVATE)]
    imports = re.compile(r"from distla\.?\w* import _")
    found += [
        h
        for f in user_facing()
        if str(f.relative_to(ROOT)) not in PRIVATE_IMPORT_ALLOWED
        for h in hits(f, imports)
    ]
    assert not found, "private names in what users read:\n" + "\n".join(found)


def test_no_jax_src_outside_the_allow_list():
    pattern = re.compile(r"^\s*(?:from|import)\s+jax\._src")
    found = [
        h
        for f in library()
        if str(f.relative_to(ROOT)) not in JAX_SRC_ALLOWED
        for h in hits(f, pattern)
    ]
    assert not found, "jax._src imported:\n" + "\n".join(found)


def test_no_issue_or_item_numbers():
    files = [
        ROOT / "README.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "benchmarks").glob("*.py"),
    ]
    files += [*(ROOT / "tests").glob("*.py"), *library()]
    found = [h for f in files if f.name != "test_architecture.py" for h in hits(f, NUMBERS)]
    assert not found, "issue or item numbers:\n" + "\n".join(found)


# --- function length ------------------------------------------------------------------------
# A function's lines of code, its docstring not counted (a public function's docstring is
# its API page); longer ones say why they must be one piece, in a comment with those words.
MAX_LINES = 80


def long_functions(path: Path) -> list[str]:
    import ast

    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = node.body[0]
        doc = 0
        if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
            doc = first.end_lineno - first.lineno + 1 if isinstance(first.value.value, str) else 0
        code = node.end_lineno - node.lineno + 1 - doc
        body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if code > MAX_LINES and "one piece" not in body:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {code} lines")
    return found


def test_long_functions_are_caught():
    import tempfile

    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:
        path = Path(tmp) / "long.py"

        def source(lines):  # the def, a docstring, lines - 2 assignments, the return
            body = "".join(f"    x{i} = {i}\n" for i in range(lines - 2))
            return f'def f():\n    """Doc."""\n{body}    return 0\n'

        path.write_text(source(MAX_LINES + 1))
        assert len(long_functions(path)) == 1
        path.write_text(source(MAX_LINES))
        assert not long_functions(path)
        path.write_text(source(MAX_LINES + 1).replace("return 0", "return 0  # one piece: why"))
        assert not long_functions(path)


def test_no_long_functions():
    found = [hit for path in library() for hit in long_functions(path)]
    assert not found, f"functions over {MAX_LINES} lines of code:\n" + "\n".join(found)


# --- the import graph -----------------------------------------------------------------------
# Every module of the library, its imports resolved to module names (relative ones
# included, and those inside functions), then: no cycle, no import from a lower layer to
# a higher one, and no intra-package import inside a function unless listed here.


# kernels < the floor < algorithm modules < public modules < command-line tools
def layer(module: str) -> int:
    parts = module.split(".")
    if parts[1:2] == ["kernels"]:
        return 0
    if parts[1:2] == ["_core"]:
        return 1
    if parts[1:2] in (["linalg"], ["fft"]) and len(parts) > 2:
        return 2
    if parts[1:2] in (["tools"], ["__main__"]):  # the command line sits on top
        return 4
    return 3


# (importer, imported): upward imports that stay, and why.
UPWARD_ALLOWED: set[tuple[str, str]] = set()
# Packages whose modules import the library inside functions, and why.
FUNCTION_LEVEL_ALLOWED = {
    # the command-line tools import jax and the library only when a command runs, so
    # that `python -m distla --help` starts without either
    "distla.tools",
}


def module_files() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "distla").rglob("*.py")):
        rel = path.relative_to(ROOT / "distla")
        if rel.parts[0] == "kernels":  # a link to ROOT/kernels, listed below
            continue
        found[".".join(("distla", *rel.with_suffix("").parts)).removesuffix(".__init__")] = path
    for path in sorted((ROOT / "kernels").glob("*.py")):
        found[f"distla.kernels.{path.stem}".removesuffix(".__init__")] = path
    return found


def imports_of(module: str, path: Path, known) -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for each distla import of ``module``."""
    import ast

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            )
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, inside) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                for a in child.names:  # `from pkg import module` names a module
                    sub = f"{target}.{a.name}"
                    out.append((sub if sub in known else target, child.lineno, inside))
            visit(child, inside)

    visit(__import__("ast").parse(path.read_text(encoding="utf-8")), False)
    return [
        (t, line, inside) for t, line, inside in out if t == "distla" or t.startswith("distla.")
    ]


def import_graph():
    files = module_files()
    return {m: imports_of(m, p, files) for m, p in files.items()}


def test_import_graph_reads_relative_and_function_level_imports():
    graph = import_graph()
    solve = {t for t, _, _ in graph["distla.linalg._lu.solve"]}
    assert {"distla.linalg._refine", "distla._core.checks", "distla._core.route"} <= solve
    assert "distla.kernels.lu" in {t for t, _, _ in graph["distla.linalg._lu.programs"]}
    tools = [t for t, _, inside in graph["distla.tools.doctor"] if inside]
    assert "distla" in tools


def test_no_import_cycle():
    graph = import_graph()
    edges = {m: {t for t, _, _ in targets if t in graph and t != m} for m, targets in graph.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t) :] + [t]))
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_imports_go_down_only():
    upward = [
        f"{m} ({layer(m)}) imports {t} ({layer(t)}) at line {line}"
        for m, targets in import_graph().items()
        for t, line, _ in targets
        if layer(t) > layer(m) and (m, t) not in UPWARD_ALLOWED
    ]
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_function_level_imports_inside_the_library():
    found = [
        f"{m}:{line} imports {t} inside a function"
        for m, targets in import_graph().items()
        if not any(m == p or m.startswith(p + ".") for p in FUNCTION_LEVEL_ALLOWED)
        for t, line, inside in targets
        if inside
    ]
    assert not found, "function-level imports:\n" + "\n".join(found)


# The functions that read an operand's mesh: only the route (distla/_core) calls them;
# every family receives the mesh in the resolved plan.
MESH_READERS = frozenset({"operand_mesh", "mesh_of"})
# Modules outside distla/_core that still read an operand's mesh, and why.
MESH_READERS_ALLOWED: set[str] = set()


def mesh_reads(path: Path, root: Path = ROOT) -> list[str]:
    """``path:line: name`` for each use (call, reference or import) of a mesh reader."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
        else:
            continue
        found += [
            f"{path.relative_to(root)}:{node.lineno}: {n}" for n in names if n in MESH_READERS
        ]
    return found


def test_mesh_reads_are_caught(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from .._core.mesh import operand_mesh\n"
        "m = _plan.mesh_of(a, names=('a',))\n"
        "'''see operand_mesh'''\n"
    )
    found = mesh_reads(probe, root=tmp_path)
    assert [h.split(": ")[1] for h in found] == ["operand_mesh", "mesh_of"]


def test_no_mesh_reads_outside_the_core():
    found = [
        h
        for f in sorted((ROOT / "distla").rglob("*.py"))
        if f.relative_to(ROOT).parts[:2] != ("distla", "_core")
        and str(f.relative_to(ROOT)) not in MESH_READERS_ALLOWED
        for h in mesh_reads(f)
    ]
    assert not found, "operand meshes read outside distla/_core (the plan carries it):\n" + (
        "\n".join(found)
    )
    stale = [f for f in MESH_READERS_ALLOWED if not mesh_reads(ROOT / f)]
    assert not stale, f"allowed but reading no mesh any more (drop them): {stale}"
