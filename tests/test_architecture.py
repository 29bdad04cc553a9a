"""The shape of the package (README, "How it works"): imports only point down
the layers, no import cycle (between modules, or between package folders),
private names stay private, one home for the wire vocabulary and its numbers.

Layers, bottom up:

    0  kbatch.errors, kbatch.wire        exceptions, the wire vocabulary, the version
    1  kbatch._core                      compiled core (Cython)
    2  kbatch.lib                        decode, partition logs, txns, records, writer
    3  kbatch.internal                   internal topics as tables
       kbatch.payloads                   Schema Registry payloads: the offline registry, decoders
    4  kbatch.spark                      integrations
    5  kbatch.tools                      cli, dump, stats, verify, sample, pipeline
       kbatch (the package facade) and kbatch.__main__ sit above all

What is scanned: every ``.py``, ``.pyx`` and ``.pxd`` file under kbatch/. A
``.pyx`` and its ``.pxd`` are one module (``kbatch._core._batch``); a ``.pxd``
alone is a module too (``kbatch._core._cursor``).

What counts as an import: ``import``, ``from ... import``, ``cimport`` and
``from ... cimport``, absolute or relative (``from . import x``,
``from .mod cimport y``), on one line or spread over several (parenthesised
or backslash-continued), and ``importlib.import_module("kbatch...")`` /
``__import__("kbatch...")`` with a literal name. An import counts wherever it
is written (module level or inside a function), except under
``if TYPE_CHECKING:`` for the layer and cycle checks. Python files are read
with ``ast``; Cython files have their comments and string literals blanked,
are cut into logical statements (brackets and backslashes joined), and each
import statement is parsed by ``ast`` with ``cimport`` read as ``import``
(an import statement that does not parse fails the test rather than being
skipped).

The rule for private names (``test_no_module_reaches_into_another_modules_private_names``):
a name is private when it starts with one underscore; dunders
(``__version__``, ``__all__``) are not private. A module may not reach a
private name of another kbatch module, neither by importing it
(``from kbatch.x import _name``, ``from .x cimport _name``) nor through the
module object (``from kbatch.lib import segment`` then ``segment._name``;
``import kbatch.lib.log as L`` then ``L._jobs``; ``import kbatch.lib.log``
then ``kbatch.lib.log._jobs``; ``getattr(segment, "_name")``). The one
exception: the private name is itself a module that sits in the folder of the
package it is reached through (``from kbatch._core import _batch``,
``import kbatch._core._batch``, ``from kbatch._core._batch cimport ...``):
private modules are how the library reaches the compiled core, and which
module may import which is the layer rule's business. A private name defined
in a package's ``__init__`` is private to that ``__init__``, also for the
package's own modules. Type-only imports count here too: they still couple to
the name.
"""

from __future__ import annotations

import ast
import pathlib
import re
import textwrap
from collections import deque
from typing import NamedTuple

import pytest

import kbatch.wire as wire

PKG = pathlib.Path(wire.__file__).resolve().parent

LAYERS = [
    ("kbatch.errors", 0), ("kbatch.wire", 0), ("kbatch._version", 0), ("kbatch._core", 1), ("kbatch.lib", 2),
    ("kbatch.internal", 3), ("kbatch.payloads", 3), ("kbatch.spark", 4), ("kbatch.tools", 5),
    ("kbatch.__main__", 6),
]
FACADE = {"kbatch", "kbatch.__main__"}      # sit above all; import everything by design
SUFFIXES = (".py", ".pyx", ".pxd")


def layer_of(module: str) -> int:
    if module in FACADE:
        return 6
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"{module} is in no layer: add it to a layer package")


def module_name(path: pathlib.Path, root: pathlib.Path = PKG.parent) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_sources() -> dict[str, list[pathlib.Path]]:
    """module -> its source files (a .pyx and its .pxd are one module), .py/.pyx first."""
    out: dict[str, list[pathlib.Path]] = {}
    for path in sorted(PKG.rglob("*"), key=lambda p: (SUFFIXES.index(p.suffix) if p.suffix in SUFFIXES else 9, p)):
        if path.suffix in SUFFIXES and "__pycache__" not in path.parts and path.is_file():
            out.setdefault(module_name(path), []).append(path)
    return out


SOURCES = all_sources()
MODULES = {m: paths[0] for m, paths in SOURCES.items()}
PACKAGES = {m for m, paths in SOURCES.items() if any(p.stem == "__init__" for p in paths)}
TEXT: dict[pathlib.Path, str] = {p: p.read_text() for paths in SOURCES.values() for p in paths}


def rel(path: pathlib.Path) -> str:
    return str(path.relative_to(PKG.parent))


def kind_of(path: pathlib.Path) -> str:
    return "py" if path.suffix == ".py" else "cython"


def package_of(module: str, packages=None) -> str:
    """The package a module's relative imports start from (and the folder it sits in)."""
    packages = PACKAGES if packages is None else packages
    return module if module in packages else module.rpartition(".")[0]


folder_of = package_of


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# --- Cython source: comments and strings blanked, logical statements --------------


def blank_comments_and_strings(text: str) -> str:
    """``text`` with every comment removed and every string literal made
    ``""`` (newlines inside kept, so line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "'\"":
            quote = text[i:i + 3] if text[i:i + 3] in ("'''", '"""') else c
            j = i + len(quote)
            while j < n:
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    j += len(quote)
                    break
                if len(quote) == 1 and text[j] == "\n":      # unterminated: stop at the line end
                    break
                j += 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def logical_statements(text: str) -> list[tuple[int, str]]:
    """(first line, statement) of a Cython source: comments and strings
    blanked, bracketed and backslash-continued lines joined (with their
    newlines, so line n of a statement is physical line first + n - 1), and
    ``;`` split."""
    out, buf, depth, start = [], [], 0, None
    for lineno, line in enumerate(blank_comments_and_strings(text).split("\n"), 1):
        if start is None:
            start = lineno
        for ch in line:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth = max(0, depth - 1)
        buf.append(line.strip())
        if depth or line.rstrip().endswith("\\"):
            continue
        joined = "\n".join(buf).strip()      # newlines kept: ast line numbers stay physical
        offset = 0
        for piece in joined.split(";"):
            body = piece.strip()
            if body:
                lead = offset + piece.index(body[0])
                out.append((start + joined.count("\n", 0, lead), body))
            offset += len(piece) + 1
        buf, start = [], None
    return out


_CY_IMPORT = re.compile(r"^(?:from\s+\.*[\w.]*\s+c?import\b|c?import\s)")
_CAST = re.compile(r"<(?:const\s+)?[A-Za-z_][\w.]*(?:\s*\*+)?\s*\??>(?=\s*[\w(\[&<\x27\x22-])")
_ADDRESS_OF = re.compile(r"(^|[(,=\[]|[-+*/%|^~<>]\s)(\s*)&(?=[A-Za-z_(])")     # &x, not a & b
_C_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
_CDEF_ASSIGN = re.compile(r"^c?p?def\s+(?:(?:public|readonly|inline|const|unsigned|signed|long|short)\s+)*"
                          r"[\w.\[\]]+(?:\s*\*+\s*|\s+)(\w+)\s*=(?!=)\s*(.+)$", re.S)
_HEADER = re.compile(r"^(?:if|elif|while)\s+(.+):$", re.S)


def pythonize(stmt: str) -> str | None:
    """A Cython statement as Python ``ast`` can parse (casts, address-of and C
    literal suffixes dropped; ``cdef T x = e`` as ``x = e``; a block header
    ``if c:`` as ``if c: pass``), or None when it cannot be made so."""
    s = _C_SUFFIX.sub(r"\1", _CAST.sub("", stmt))
    s = _ADDRESS_OF.sub(r"\1\2", s)
    s = re.sub(r"^(?:else|try|finally)\s*:\s*", "", s)           # else: return x -> return x
    s = re.sub(r"^elif\b", "if", s)
    m = _CDEF_ASSIGN.match(s)
    if m:
        s = f"{m.group(1)} = {m.group(2)}"
    m = _HEADER.match(s)
    if m:
        s = f"if {m.group(1)}: pass"
    elif re.match(r"^(?:for|with)\b", s) and s.endswith(":"):
        s += " pass"
    if not s:
        return None
    try:
        ast.parse(s)
    except SyntaxError:
        return None
    return s


def _source(source: str, node) -> str:
    """The source of a node, on one line (as written: ``0x08``, not ``8``)."""
    return " ".join((ast.get_source_segment(source, node) or ast.unparse(node)).split())


def cython_trees(text: str):
    """(first line, ast, python text) of each Cython statement Python can
    parse, and (first line, statement) of the rest."""
    parsed, rest = [], []
    for lineno, stmt in logical_statements(text):
        if _CY_IMPORT.match(stmt):
            continue
        py = pythonize(stmt)
        if py is None:
            rest.append((lineno, stmt))
        else:
            parsed.append((lineno, ast.parse(py), py))
    return parsed, rest


# --- imports -------------------------------------------------------------------------

class Import(NamedTuple):
    line: int
    module: str          # 'import a.b' -> 'a.b'; 'from a import b' -> 'a' (absolute)
    name: str | None     # 'from a import b' -> 'b'; None for 'import a.b'
    asname: str | None
    cimport: bool
    type_only: bool      # under 'if TYPE_CHECKING:'


def _is_type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            and isinstance(test.value, ast.Name) and test.value.id == "typing")


def _type_checking_nodes(tree) -> set[int]:
    """Nodes in the body of ``if TYPE_CHECKING:`` (not in its ``else``, and
    not under ``if not TYPE_CHECKING:``, which runs)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for sub in node.body:
                skip.update(id(inner) for inner in ast.walk(sub))
    return skip


def _absolute(base: str | None, level: int, package: str) -> str:
    if not level:
        return base or ""
    anchor = package.split(".")
    anchor = anchor[:len(anchor) - level + 1]
    return ".".join(anchor + ([base] if base else []))


def _imports_of_tree(tree, package: str, line0: int = 0, cimport: bool = False, skip=frozenset()):
    out = []
    for node in ast.walk(tree):
        type_only = id(node) in skip
        line = line0 + getattr(node, "lineno", 1)
        if isinstance(node, ast.Import):
            out += [Import(line, a.name, None, a.asname, cimport, type_only) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            out += [Import(line, base, a.name, a.asname, cimport, type_only) for a in node.names]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module")
                   or isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")):
            out.append(Import(line, node.args[0].value, None, None, False, type_only))
    return out


def parse_imports(text: str, kind: str, package: str) -> list[Import]:
    """Every import statement of a source (``kind`` "py" or "cython"),
    relative ones made absolute from ``package``."""
    if kind == "py":
        tree = ast.parse(text)
        return _imports_of_tree(tree, package, skip=_type_checking_nodes(tree))
    out = []
    for lineno, stmt in logical_statements(text):
        if not _CY_IMPORT.match(stmt):
            continue
        cimport = bool(re.match(r"^(?:cimport\b|from\s+\S+\s+cimport\b)", stmt))
        py = re.sub(r"\bcimport\b", "import", stmt, count=1)
        try:
            tree = ast.parse(py)
        except SyntaxError as exc:
            raise AssertionError(f"line {lineno}: cannot read the import {stmt!r} ({exc.msg})") from None
        out += _imports_of_tree(tree, package, lineno - 1, cimport)
    return out


def resolve(name: str, modules=None) -> str | None:
    """The kbatch module an import names (longest existing prefix)."""
    modules = MODULES if modules is None else modules
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def target_of(imp: Import, modules=None) -> str | None:
    """The kbatch module an import reaches: ``from kbatch.lib import log`` ->
    ``kbatch.lib.log``; ``from kbatch.lib.log import open_log`` -> ``kbatch.lib.log``."""
    modules = MODULES if modules is None else modules
    if imp.module.split(".")[0] != "kbatch":
        return None
    if imp.name and imp.name != "*" and f"{imp.module}.{imp.name}" in modules:
        return f"{imp.module}.{imp.name}"
    return resolve(imp.module, modules)


def imports_in(module: str) -> list[tuple[Import, pathlib.Path]]:
    package = package_of(module)
    return [(imp, path) for path in SOURCES[module]
            for imp in parse_imports(TEXT[path], kind_of(path), package)]


IMPORTS = {m: imports_in(m) for m in SOURCES}


def edges_of(module: str) -> dict[str, tuple[pathlib.Path, int]]:
    """kbatch modules a module imports -> one place it does (file, line)."""
    out: dict[str, tuple[pathlib.Path, int]] = {}
    for imp, path in sorted(IMPORTS[module], key=lambda ip: (str(ip[1]), ip[0].line)):
        target = target_of(imp)
        if target and target != module and not imp.type_only:
            out.setdefault(target, (path, imp.line))
    return out


EDGES = {m: edges_of(m) for m in SOURCES}
GRAPH = {m: set(e) for m, e in EDGES.items()}


def where(module: str, target: str) -> str:
    path, line = EDGES[module][target]
    return f"{rel(path)}:{line}"


def test_every_module_has_a_layer():
    """Every module (.py, .pyx, .pxd) lies in a layer package; a new top-level module must be listed."""
    for m in MODULES:
        layer_of(m)


def test_imports_point_down_the_layers():
    """A module imports (or cimports) only modules of its own layer or below, and never the facade."""
    wrong = []
    for m, deps in GRAPH.items():
        for d in deps:
            if layer_of(d) > layer_of(m):
                wrong.append(f"{where(m, d)}: {m} (layer {layer_of(m)}) imports {d} (layer {layer_of(d)})")
            if m != "kbatch" and d == "kbatch":
                wrong.append(f"{where(m, d)}: {m} imports the package facade 'kbatch'; import the module")
    assert not wrong, "\n".join(sorted(wrong))


def _cycles(graph):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _a_cycle(graph, comp) -> list[str]:
    """One shortest cycle through the first node of a component."""
    start, inside = comp[0], set(comp)
    prev, todo = {start: None}, deque([start])
    while todo:
        v = todo.popleft()
        for w in sorted(graph.get(v, ())):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if w in inside and w not in prev:
                prev[w] = v
                todo.append(w)
    return [start]


def describe_cycles(graph, example) -> list[str]:
    """One block per cycle: a path around it, then every edge inside it with
    ``example(a, b)`` (one import that makes the edge)."""
    blocks = []
    for comp in _cycles(graph):
        lines = [f"cycle {' -> '.join(_a_cycle(graph, comp))}"]
        inside = set(comp)
        for a in comp:
            for b in sorted(graph[a] & inside):
                lines.append(f"    {a} -> {b}: {example(a, b)}")
        blocks.append("\n".join(lines))
    return blocks


def test_no_import_cycle():
    """No cycle between modules (the facade imports everything by design; left out)."""
    graph = {m: deps - FACADE for m, deps in GRAPH.items() if m not in FACADE}
    blocks = describe_cycles(graph, lambda a, b: f"{where(a, b)} imports {b}")
    assert not blocks, "\n".join(blocks)


def folder_graph(edges: dict[str, dict[str, object]], folder=folder_of):
    """Folders as nodes: ``a -> b`` when a module in folder a imports one in
    folder b (a != b). Returns (graph, example): example[(a, b)] = (module, where, target)."""
    graph: dict[str, set[str]] = {}
    example: dict[tuple[str, str], tuple] = {}
    for m in sorted(edges):
        fa = folder(m)
        graph.setdefault(fa, set())
        for d, at in sorted(edges[m].items()):
            fb = folder(d)
            if fa != fb:
                graph[fa].add(fb)
                example.setdefault((fa, fb), (m, at, d))
    return graph, example


def test_no_package_folder_cycle():
    """Modules collapsed to their package folder (``kbatch.lib.remote.log`` ->
    ``kbatch.lib.remote``, ``kbatch.lib.log`` -> ``kbatch.lib``, a package's
    ``__init__`` -> the package): no cycle in that graph, where a module
    importing its own folder's modules is no edge. The facade
    (``kbatch/__init__.py``, ``kbatch/__main__.py``) is left out."""
    edges = {m: {d: e for d, e in es.items() if d not in FACADE} for m, es in EDGES.items() if m not in FACADE}
    graph, example = folder_graph(edges)

    def show(a, b):
        m, (path, line), d = example[(a, b)]
        return f"{rel(path)}:{line} ({m} imports {d})"

    blocks = describe_cycles(graph, show)
    assert not blocks, f"{len(blocks)} package folder cycle(s):\n" + "\n".join(blocks)


def test_the_cycle_finder_finds_cycles():
    """Self-test: the component finder and the path it prints around a cycle."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert _a_cycle({"a": {"b", "c"}, "b": {"a"}, "c": {"b"}}, ["a", "b", "c"]) == ["a", "b", "a"]


def test_the_folder_graph_collapses_modules_to_folders():
    """Self-test: modules become folders, same-folder imports are no edge, a lib <-> lib.remote cycle is found."""
    folders = {"p": "p", "p.lib": "p.lib", "p.lib.log": "p.lib", "p.lib.seg": "p.lib",
               "p.lib.remote": "p.lib.remote", "p.lib.remote.log": "p.lib.remote", "p.wire": "p"}
    edges = {"p.lib.log": {"p.lib.remote.log": ("lib/log.py", 9), "p.lib.seg": ("lib/log.py", 3)},
             "p.lib.remote.log": {"p.lib.seg": ("lib/remote/log.py", 4), "p.wire": ("lib/remote/log.py", 2)},
             "p.lib.seg": {"p.wire": ("lib/seg.py", 1)}}
    graph, example = folder_graph(edges, folders.get)
    assert graph == {"p.lib": {"p.lib.remote", "p"}, "p.lib.remote": {"p.lib", "p"}}
    assert _cycles(graph) == [["p.lib", "p.lib.remote"]]
    assert example[("p.lib", "p.lib.remote")] == ("p.lib.log", ("lib/log.py", 9), "p.lib.remote.log")
    blocks = describe_cycles(graph, lambda a, b: example[(a, b)][1])
    assert blocks == ["cycle p.lib -> p.lib.remote -> p.lib\n"
                      "    p.lib -> p.lib.remote: ('lib/log.py', 9)\n"
                      "    p.lib.remote -> p.lib: ('lib/remote/log.py', 4)"]
    del edges["p.lib.remote.log"]["p.lib.seg"]        # the remote folder no longer imports lib
    assert _cycles(folder_graph(edges, folders.get)[0]) == []
    assert [folder_of(m) for m in ("kbatch.internal.tables", "kbatch.internal", "kbatch.lib.log",
                                   "kbatch.spark.read", "kbatch.spark", "kbatch.wire", "kbatch._core._wire")] == \
        ["kbatch.internal", "kbatch.internal", "kbatch.lib", "kbatch.spark", "kbatch.spark", "kbatch",
         "kbatch._core"]


# --- reading imports: self-tests ---------------------------------------------------

def _targets(text, kind, package, modules):
    return {(i.line, target_of(i, modules)) for i in parse_imports(text, kind, package) if target_of(i, modules)}


FAKE = {"kbatch", "kbatch.wire", "kbatch.lib", "kbatch.lib.log", "kbatch.lib.segment",
        "kbatch._core", "kbatch._core._batch", "kbatch._core._cursor", "kbatch._core._wire"}


def test_cython_imports_are_read_multiline_relative_and_cimported():
    """Self-test: Cython imports in every form, none from comments or docstrings."""
    pyx = '''\
"""A docstring that mentions
from kbatch.lib import log
"""
from libc.stdint cimport int64_t
cimport kbatch._core._cursor as C
from . cimport _wire
from ._batch cimport (BatchDecoder,
                      Limits)
from kbatch.lib import (
    log,
    segment,
)
from kbatch import \\
    wire
import numpy as np   # from kbatch.lib import log (a comment)
cdef int f():
    from .._core._cursor cimport Cursor
    import kbatch.lib.segment
'''
    found = _targets(pyx, "cython", "kbatch._core", FAKE)
    assert found == {(5, "kbatch._core._cursor"), (6, "kbatch._core._wire"), (7, "kbatch._core._batch"),
                     (9, "kbatch.lib.log"), (9, "kbatch.lib.segment"), (13, "kbatch.wire"),
                     (17, "kbatch._core._cursor"), (18, "kbatch.lib.segment")}
    imps = parse_imports(pyx, "cython", "kbatch._core")
    assert [i.cimport for i in imps if i.line == 6] == [True]
    assert [i.cimport for i in imps if i.line == 9] == [False, False]


def test_python_imports_skip_only_type_checking_bodies():
    """Self-test: ``if TYPE_CHECKING:`` bodies are type-only; ``else:`` and ``if not TYPE_CHECKING:`` run."""
    py = '''\
from typing import TYPE_CHECKING
import importlib
if TYPE_CHECKING:
    from kbatch.lib import log
else:
    from kbatch.lib import segment
if not TYPE_CHECKING:
    from . import wire
def f():
    return importlib.import_module("kbatch._core._batch")
'''
    imps = parse_imports(py, "py", "kbatch")
    runtime = {target_of(i, FAKE) for i in imps if not i.type_only} - {None}
    assert runtime == {"kbatch.lib.segment", "kbatch.wire", "kbatch._core._batch"}
    assert {target_of(i, FAKE) for i in imps if i.type_only} == {"kbatch.lib.log"}


def test_a_cython_import_that_cannot_be_read_fails():
    """Self-test: an import the reader cannot parse fails loudly instead of being skipped."""
    with pytest.raises(AssertionError, match="cannot read"):
        parse_imports("from kbatch.lib cimport (a,\n b c)\n", "cython", "kbatch._core")


# --- private names ---------------------------------------------------------------------

def private_reaches(module: str, text: str, kind: str, modules=None, packages=None) -> list[tuple[int, str]]:
    """(line, what) for each private name of another kbatch module that
    ``module``'s source reaches (see the module docstring for the rule)."""
    modules = MODULES if modules is None else modules
    packages = PACKAGES if packages is None else packages
    imports = parse_imports(text, kind, package_of(module, packages))
    wrong = []

    def allowed(owner: str, name: str) -> bool:
        return owner in packages and f"{owner}.{name}" in modules

    bound: dict[str, str] = {}          # local name -> kbatch module object it holds
    for imp in imports:
        if imp.module.split(".")[0] != "kbatch":
            continue
        if imp.name is None:
            if imp.asname:
                if imp.module in modules:
                    bound[imp.asname] = imp.module
            else:
                bound[imp.module.split(".")[0]] = imp.module.split(".")[0]
            parts = imp.module.split(".")
            for i in range(1, len(parts)):     # import kbatch._core._batch: _core, _batch
                if is_private(parts[i]) and not allowed(".".join(parts[:i]), parts[i]):
                    wrong.append((imp.line, f"import {imp.module}"))
            continue
        full = f"{imp.module}.{imp.name}"
        if full in modules:
            bound[imp.asname or imp.name] = full
        owner = resolve(imp.module, modules)
        if owner and owner != module and is_private(imp.name) and not allowed(imp.module, imp.name):
            wrong.append((imp.line, f"from {imp.module} {'c' if imp.cimport else ''}import {imp.name}"))
        parts = imp.module.split(".")
        for i in range(1, len(parts)):
            if is_private(parts[i]) and not allowed(".".join(parts[:i]), parts[i]):
                wrong.append((imp.line, f"from {imp.module} import ..."))

    def reach(line: int, owner_expr: str, name: str):
        root, _, rest = owner_expr.partition(".")
        if root not in bound or not is_private(name):
            return
        owner = bound[root] + ("." + rest if rest else "")
        if owner in modules and owner != module and not allowed(owner, name):
            wrong.append((line, f"{owner_expr}.{name} ({owner}.{name})"))

    if kind == "py":
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute):
                chain = _dotted(node.value)
                if chain:
                    reach(node.lineno, chain, node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                  and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                  and isinstance(node.args[1].value, str)):
                chain = _dotted(node.args[0])
                if chain:
                    reach(node.lineno, chain, node.args[1].value)
    else:
        blank = blank_comments_and_strings(text)
        for lineno, line in enumerate(blank.split("\n"), 1):
            for m in re.finditer(r"(?<![\w.])([A-Za-z_]\w*(?:\s*\.\s*\w+)*)\s*\.\s*(_\w+)", line):
                if not _CY_IMPORT.match(line.strip()):
                    reach(lineno, re.sub(r"\s+", "", m.group(1)), m.group(2))
                    chain = re.sub(r"\s+", "", m.group(1)).split(".")
                    for i in range(1, len(chain)):       # a.b._c.d: also a.b._c
                        reach(lineno, ".".join(chain[:i]), chain[i])
    return sorted(set(wrong))


def _dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return None


def test_no_module_reaches_into_another_modules_private_names():
    """A private name (one leading underscore, not a dunder) is private to its
    module: no ``from kbatch.x import _name`` / ``cimport _name`` from another
    module, and no ``x._name`` / ``getattr(x, "_name")`` on another kbatch
    module's object. Allowed: a private *module* reached through its own
    package (``from kbatch._core import _batch``, ``kbatch._core._batch``)."""
    wrong = []
    for m, paths in SOURCES.items():
        for path in paths:
            for line, what in private_reaches(m, TEXT[path], kind_of(path)):
                wrong.append(f"{rel(path)}:{line}: {m} reaches {what}")
    assert not wrong, f"{len(wrong)} private name(s) reached across modules:\n" + "\n".join(wrong)


FAKE_PACKAGES = {"kbatch", "kbatch.lib", "kbatch._core"}


def test_the_private_name_check_finds_reaches():
    """Self-test: each way of reaching another module's private name is reported, with its line."""
    bad = '''\
from kbatch.lib import segment
from kbatch.lib.segment import (open_source,
                                _map_file)
import kbatch.lib.log as L
import kbatch.lib.log
from . import log as lg
def f():
    segment._map_file(1)
    L._jobs
    kbatch.lib.log._jobs.clear()
    getattr(lg, "_jobs")
    from kbatch._core._batch import _helper
'''
    got = private_reaches("kbatch.lib.chain", bad, "py", FAKE, FAKE_PACKAGES)
    assert [line for line, _ in got] == [2, 8, 9, 10, 11, 12], got
    pyx = '''\
from kbatch._core._cursor cimport (Cursor,
                                   _load)
from kbatch._core import _batch
cimport kbatch._core._cursor as C
cdef int g():
    return _batch._private_fn(C._helper)   # _batch._x in a comment
'''
    got = private_reaches("kbatch._core._wire", pyx, "cython", FAKE, FAKE_PACKAGES)
    assert [line for line, _ in got] == [1, 6, 6], got


def test_the_private_name_check_passes_clean_code():
    """Self-test: private modules, dunders, public names and one's own private names pass."""
    clean = '''\
from kbatch._core import _batch
import kbatch._core._batch
from kbatch._core._batch import BatchDecoder
from kbatch.wire import UNBOUNDED as _WHOLE
from kbatch import __version__
from kbatch.lib import segment
_local = 1
class C:
    _own = 2
    def f(self):
        return self._own, _local, _batch.BatchDecoder, kbatch._core._batch.x, segment.__doc__, _WHOLE
'''
    assert private_reaches("kbatch.lib.chain", clean, "py", FAKE, FAKE_PACKAGES) == []
    pyx = '''\
from kbatch._core._cursor cimport Cursor, load_be32
from kbatch._core import _batch
cdef class D:
    cdef int _n
    def f(self):
        return self._n + _batch.run()
'''
    assert private_reaches("kbatch._core._wire", pyx, "cython", FAKE, FAKE_PACKAGES) == []


# --- the wire vocabulary ----------------------------------------------------------------

def test_wire_vocabulary_agrees_with_the_compiled_copy():
    """``_core/_wire.pxd`` repeats wire.py's numbers for Cython: same values."""
    pxd = (PKG / "_core" / "_wire.pxd").read_text()
    values = {m.group(1): int(m.group(2), 0)
              for m in re.finditer(r"^\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", pxd, re.M)}
    for field in wire.Header:
        key = "HEADER_V2" if field is wire.Header.RECORDS else f"H_{field.name}"
        assert values[key] == field.value, key
    for codec in wire.Codec:
        assert values[f"CODEC_{codec.name}"] == codec.value
    for flag in wire.Attr:
        assert values[f"ATTR_{flag.name}"] == flag.value
    assert values["ATTR_CODEC"] == wire.ATTR_CODEC_MASK
    assert values["LEGACY_ATTR_CODEC"] == wire.LEGACY_ATTR_CODEC_MASK
    assert values["LEGACY_ATTR_LOG_APPEND_TIME"] == wire.LEGACY_ATTR_LOG_APPEND_TIME
    assert values["LOG_OVERHEAD"] == wire.LOG_OVERHEAD
    assert values["CRC_START"] == wire.CRC_START
    assert values["CONTROL_ABORT"] == wire.ControlType.ABORT
    assert values["CONTROL_COMMIT"] == wire.ControlType.COMMIT


VOCABULARY = [
    # (what, pattern that only a home of the vocabulary may define)
    ("codec names", re.compile(r"""\{\s*0:\s*["']none["']""")),
    ("control type names", re.compile(r"""\{\s*0:\s*["']ABORT["']""")),
    ("ABORT/COMMIT numbers", re.compile(r"^\s*ABORT,\s*COMMIT\b.*=\s*0,\s*1", re.M)),
    ("attribute bits", re.compile(r"^\s*ATTR_\w+\s*=\s*0x", re.M)),
    ("'whole' sentinels", re.compile(r"^_WHOLE\s*=", re.M)),
]
HOMES = {"kbatch.wire", "kbatch._core._wire"}


@pytest.mark.parametrize("what,pattern", VOCABULARY, ids=[v[0] for v in VOCABULARY])
def test_one_home_for_the_wire_vocabulary(what, pattern):
    """Codec names, control type names and numbers, attribute bits, the 'whole' sentinel: defined
    only in kbatch/wire.py and ``_core/_wire.pxd``."""
    defined = [rel(p) for m, paths in SOURCES.items() if m not in HOMES
               for p in paths if pattern.search(TEXT[p])]
    assert defined == [], f"{what} defined outside kbatch/wire.py: {defined}"


# --- one "no end offset" sentinel ------------------------------------------------------

INT64_MAX = (1 << 63) - 1
_SENTINEL_TEXT = [
    re.compile(r"\(\s*(?:<\w+>\s*)?1\s*<<\s*63\s*\)\s*-\s*1\b"),
    re.compile(r"\(?\s*2\s*\*\*\s*63\s*\)?\s*-\s*1\b"),
    re.compile(r"\b9223372036854775807\b"),
    re.compile(r"\b0[xX]0*7[fF]{15}\b"),
    re.compile(r"\biinfo\s*\(\s*[\w.'\"]*int64[\w'\"]*\s*\)\s*\.\s*max\b"),
]
_MAX_BITS = 1 << 70


def _const_int(node) -> int | None:
    """The value of an expression made of int literals and arithmetic, else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
        v = _const_int(node.operand)
        if v is None:
            return None
        return -v if isinstance(node.op, ast.USub) else (~v if isinstance(node.op, ast.Invert) else v)
    if isinstance(node, ast.BinOp):
        a, b = _const_int(node.left), _const_int(node.right)
        if a is None or b is None:
            return None
        op = node.op
        if isinstance(op, (ast.Pow, ast.LShift)) and not 0 <= b <= 128:
            return None
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.Pow: lambda: a ** b, ast.LShift: lambda: a << b, ast.RShift: lambda: a >> b if b >= 0 else None,
               ast.BitOr: lambda: a | b, ast.BitAnd: lambda: a & b, ast.BitXor: lambda: a ^ b}
        fn = ops.get(type(op))
        v = fn() if fn else None
        return v if v is None or abs(v) < _MAX_BITS else None
    return None


def _is_int64_iinfo_max(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "max" and isinstance(node.value, ast.Call)
            and (isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "iinfo"
                 or isinstance(node.value.func, ast.Name) and node.value.func.id == "iinfo")
            and len(node.value.args) == 1
            and re.search(r"int64|\bi8\b|'q'|\"q\"", ast.unparse(node.value.args[0])) is not None)


def _sentinels_in_tree(tree, source, line0=0) -> list[tuple[int, str]]:
    found = []

    def visit(node):
        if isinstance(node, ast.expr) and (_const_int(node) == INT64_MAX or _is_int64_iinfo_max(node)):
            found.append((line0 + node.lineno, _source(source, node)))
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def sentinel_literals(text: str, kind: str) -> list[tuple[int, str]]:
    """(line, expression) for each int64-max written out: ``(1 << 63) - 1``,
    ``2**63 - 1``, ``9223372036854775807``, ``0x7FFF_FFFF_FFFF_FFFF``, any int
    arithmetic equal to it, ``np.iinfo(np.int64).max``."""
    if kind == "py":
        return sorted(set(_sentinels_in_tree(ast.parse(text), text)))
    parsed, rest = cython_trees(text)
    found = [hit for lineno, tree, py in parsed for hit in _sentinels_in_tree(tree, py, lineno - 1)]
    for lineno, stmt in rest:
        s = _C_SUFFIX.sub(r"\1", stmt)
        found += [(lineno + s.count("\n", 0, m.start()), " ".join(m.group(0).split()))
                  for p in _SENTINEL_TEXT for m in p.finditer(s)]
    return sorted(set(found))


def test_one_no_end_offset_sentinel():
    """int64 max written out (``(1 << 63) - 1``, ``2**63 - 1``,
    ``9223372036854775807``, ``np.iinfo(np.int64).max``, or any int
    arithmetic that equals it) appears nowhere under kbatch/ but
    kbatch/wire.py (home of ``UNBOUNDED``) and ``_core/_wire.pxd``: the rest
    name the one constant."""
    wrong = [f"{rel(p)}:{line}: {expr}"
             for m, paths in SOURCES.items() if m not in HOMES
             for p in paths for line, expr in sentinel_literals(TEXT[p], kind_of(p))]
    assert not wrong, f"{len(wrong)} int64-max literal(s) outside kbatch/wire.py:\n" + "\n".join(wrong)


def test_the_sentinel_check_finds_literals():
    """Self-test: every spelling of int64 max is found, in Python and Cython."""
    py = '''\
A = (1 << 63) - 1
B = 2**63 - 1
C = 9223372036854775807
D = np.iinfo(np.int64).max
E = f(x, hi=(1<<63)-1)
F = 0x7FFF_FFFF_FFFF_FFFF
'''
    assert [line for line, _ in sentinel_literals(py, "py")] == [1, 2, 3, 4, 5, 6]
    pyx = '''\
cdef int64_t hi = (<int64_t>1 << 63) - 1
cdef inline int64_t top(int64_t x=9223372036854775807LL) nogil:
    if x > 2 ** 63 - 1:
        return 0
'''
    assert [line for line, _ in sentinel_literals(pyx, "cython")] == [1, 2, 3]


def test_the_sentinel_check_passes_names_and_other_numbers():
    """Self-test: names, int64 min, 2**63, int32 max, strings and comments pass."""
    py = '''\
from kbatch.wire import UNBOUNDED
lo = -(1 << 63)
hi = UNBOUNDED if stop is None else stop
x = 1 << 62
y = rng.integers(0, 2**63, n)
z = np.iinfo(np.int32).max
s = "9223372036854775807"   # (1 << 63) - 1 in a comment
'''
    assert sentinel_literals(py, "py") == []
    pyx = '''\
from libc.stdint cimport INT64_MAX
cdef int64_t hi = INT64_MAX   # not (1 << 63) - 1
"""(1 << 63) - 1 in a docstring"""
'''
    assert sentinel_literals(pyx, "cython") == []


# --- wire numbers compared against literally ---------------------------------------------

CODEC_NAME = re.compile(r"(?:\w+_)?codec")                        # codec, row.codec, batch_codec
ATTR_NAME = re.compile(r"(?:\w+_)?(?:attributes|attrs|attr)|(?:H_)?ATTRIBUTES")
CODEC_MASK_NAME = re.compile(r"(?:\w+_)?ATTR_CODEC(?:_MASK)?")
CODEC_IDS = range(0, 5)                   # wire.Codec
ATTR_BITS = 0x7F                          # ATTR_CODEC_MASK | every wire.Attr bit
DISPATCH_NAME = re.compile(r"(?i).*(?:codec|compress).*")


def _ident(node) -> str | None:
    """The name an operand goes by: ``codec``, ``row.codec``, ``row["codec"]``, ``int(codec)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1:
        return _ident(node.args[0])
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _is_codec(node) -> bool:
    ident = _ident(node)
    if ident is not None:
        return CODEC_NAME.fullmatch(ident) is not None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):     # attributes & ATTR_CODEC
        return any(CODEC_MASK_NAME.fullmatch(_ident(side) or "") for side in (node.left, node.right))
    return False


def _names_attributes(node) -> bool:
    return any(ATTR_NAME.fullmatch(_ident(sub) or "") for sub in ast.walk(node)
               if isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript)))


def _int_literal(node) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _mask_literal(node) -> int | None:
    """An int literal, or ``~literal``, whose bits are all attribute bits."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        node = node.operand
    v = _int_literal(node)
    return v if v is not None and v > 0 and not v & ~ATTR_BITS else None


_BITOPS = (ast.BitAnd, ast.BitOr, ast.BitXor)


def _attribute_bitop(left, op, right) -> bool:
    if isinstance(op, _BITOPS):
        return (_names_attributes(left) and _mask_literal(right) is not None
                or _names_attributes(right) and _mask_literal(left) is not None)
    if isinstance(op, ast.RShift):
        return _names_attributes(left) and _int_literal(right) in range(1, 7)
    return False


def _wire_numbers_in_tree(tree, source, line0=0) -> list[tuple[int, str]]:
    found = []

    def hit(node, what, text=None):
        found.append((line0 + node.lineno, f"{what}: {text or _source(source, node)}"))

    def visit(node):
        if isinstance(node, ast.Compare):
            operands = [node.left] + node.comparators
            for a, op, b in zip(operands, node.ops, operands[1:]):
                if isinstance(op, (ast.In, ast.NotIn)):
                    if (_is_codec(a) and isinstance(b, (ast.Tuple, ast.List, ast.Set))
                            and any(_int_literal(e) in CODEC_IDS for e in b.elts)):
                        return hit(node, "codec id")
                elif (_is_codec(a) and _int_literal(b) in CODEC_IDS
                      or _is_codec(b) and _int_literal(a) in CODEC_IDS):
                    return hit(node, "codec id")
        elif isinstance(node, ast.BinOp) and _attribute_bitop(node.left, node.op, node.right):
            return hit(node, "attribute bits")          # the outermost expression only
        elif isinstance(node, ast.AugAssign) and _attribute_bitop(node.target, node.op, node.value):
            return hit(node, "attribute bits")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [_ident(t) or "" for t in targets]
            if any(ATTR_NAME.fullmatch(n) for n in names) and (
                    _mask_literal(node.value) is not None
                    or any(isinstance(sub, ast.BinOp) and isinstance(sub.op, _BITOPS)
                           and (_mask_literal(sub.left) is not None or _mask_literal(sub.right) is not None)
                           for sub in ast.walk(node.value))):
                return hit(node, "attribute bits")
            if any(CODEC_NAME.fullmatch(n) for n in names) and _int_literal(node.value) in CODEC_IDS:
                return hit(node, "codec id")
            if (any(DISPATCH_NAME.fullmatch(n) for n in names) and isinstance(node.value, ast.Dict)
                    and len(node.value.keys) >= 2
                    and all(_int_literal(k) in CODEC_IDS for k in node.value.keys)):
                keys = ", ".join(_source(source, k) for k in node.value.keys)
                return hit(node, "codec dispatch keyed by ids", f"{names[0]} = {{{keys}: ...}}")
        elif isinstance(node, ast.keyword) and node.arg:
            if CODEC_NAME.fullmatch(node.arg) and _int_literal(node.value) in CODEC_IDS:
                return hit(node.value, "codec id", f"{node.arg}={_source(source, node.value)}")
            if ATTR_NAME.fullmatch(node.arg) and _mask_literal(node.value) is not None:
                return hit(node.value, "attribute bits", f"{node.arg}={_source(source, node.value)}")
        elif isinstance(node, ast.arguments):
            args = node.posonlyargs + node.args
            pairs = list(zip(args[len(args) - len(node.defaults):], node.defaults))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
            for arg, default in pairs:
                if CODEC_NAME.fullmatch(arg.arg) and _int_literal(default) in CODEC_IDS:
                    hit(default, "codec id", f"{arg.arg}={_source(source, default)}")
        elif isinstance(node, ast.Match) and _is_codec(node.subject):
            for case in node.cases:
                for sub in ast.walk(case.pattern):
                    if isinstance(sub, ast.MatchValue) and _int_literal(sub.value) in CODEC_IDS:
                        hit(sub, "codec id in a match",
                            f"match {_source(source, node.subject)}: case {_source(source, sub)}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


_FALLBACK_CODEC = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*(?:\w+_)?codec\s*(?:==|!=|<=|>=|<(?!<)|>(?!>))\s*"
                             r"(0[xX][0-9a-fA-F]+|\d+)(?![\w.])"
                             r"|(?<![\w.])(0[xX][0-9a-fA-F]+|\d+)\s*(?:==|!=|<=|>=|<(?!<)|>(?!>))\s*"
                             r"(?:[A-Za-z_]\w*\.)*(?:\w+_)?codec\b(?!\s*\()")
_FALLBACK_DEFAULT = re.compile(r"(?<![\w.])(?:\w+_)?codec\s*=(?!=)\s*(0[xX][0-9a-fA-F]+|\d+)(?![\w.])")
_FALLBACK_ATTR = re.compile(r"\b(?:(?:\w+_)?(?:attributes|attrs|attr)|(?:H_)?ATTRIBUTES)\s*\)?\s*"
                            r"(&|\||\^|>>)=?\s*~?\s*(0[xX][0-9a-fA-F]+|\d+)\b")


def wire_number_literals(text: str, kind: str) -> list[tuple[int, str]]:
    """(line, what) for each wire number used as a literal where the
    vocabulary has a name for it (see ``test_wire_numbers_are_named``)."""
    if kind == "py":
        return sorted(set(_wire_numbers_in_tree(ast.parse(text), text)))
    parsed, rest = cython_trees(text)
    found = [h for lineno, tree, py in parsed for h in _wire_numbers_in_tree(tree, py, lineno - 1)]
    for lineno, stmt in rest:
        s = _C_SUFFIX.sub(r"\1", _CAST.sub("", stmt))
        for m in _FALLBACK_CODEC.finditer(s):
            if int(m.group(1) or m.group(2), 0) in CODEC_IDS:
                found.append((lineno + s.count("\n", 0, m.start()), f"codec id: {m.group(0).strip()}"))
        for m in _FALLBACK_DEFAULT.finditer(s):       # def f(int codec=0), cdef int codec = 0, ...
            if int(m.group(1), 0) in CODEC_IDS:
                found.append((lineno + s.count("\n", 0, m.start()), f"codec id: {m.group(0).strip()}"))
        for m in _FALLBACK_ATTR.finditer(s):
            v = int(m.group(2), 0)
            if (m.group(1) == ">>" and v in range(1, 7)) or (m.group(1) != ">>" and v and not v & ~ATTR_BITS):
                found.append((lineno + s.count("\n", 0, m.start()), f"attribute bits: {m.group(0).strip()}"))
    return sorted(set(found))


def test_wire_numbers_are_named():
    """Outside kbatch/wire.py and ``_core/_wire.pxd`` no code compares a codec
    against a codec id literal (``codec == 3``, ``row.codec != 0``,
    ``codec in (1, 2)``, ``(attributes & ATTR_CODEC) == 0``, ``case 3:``,
    ``codec=4``, a ``{1: gunzip, ...}`` codec dispatch), and no code masks or
    builds batch attributes with a literal made of attribute bits
    (``attributes & 0x10``, ``attrs & 7``, ``attributes >> 4``,
    ``attributes |= 0x08``, ``attributes = 0x30``, ``H_ATTRIBUTES) & 7``):
    the code names them (``Codec.LZ4`` / ``CODEC_LZ4``, ``Attr.CONTROL`` /
    ``ATTR_CONTROL``, ``ATTR_CODEC_MASK``). An operand is a codec when its
    name is ``codec`` or ends in ``_codec`` (``row.codec``, ``row["codec"]``,
    ``int(codec)``); it is the attributes when it names ``attributes``,
    ``attrs``, ``attr`` (or ``*_attributes``...) or the ``ATTRIBUTES`` header
    offset. Codec ids are 0-4; an attribute literal is one whose bits all lie
    in 0x7F; other numbers (the LZ4 frame's own flags, varint bits) are no
    wire vocabulary."""
    wrong = [f"{rel(p)}:{line}: {what}"
             for m, paths in SOURCES.items() if m not in HOMES
             for p in paths for line, what in wire_number_literals(TEXT[p], kind_of(p))]
    assert not wrong, f"{len(wrong)} wire number(s) written as literals:\n" + "\n".join(wrong)


def test_the_wire_number_check_finds_literals():
    """Self-test: codec ids and attribute bits written as literals are found, in Python and Cython."""
    py = '''\
if codec == 3:
    pass
if batches.codec != 0 or 4 == row["codec"]:
    pass
ok = int(codec) in (1, 2)
control = attributes & 0x20
attributes |= 0x08
t = (attributes >> 4) & 1
attributes = codec | 0x10
_DECOMPRESSORS = {1: gunzip, 2: unsnappy, 3: unlz4, 4: unzstd}
w = SegmentWriter(f, codec=3)
def compress(data, codec=0): pass
match codec:
    case 4:
        pass
n = (attributes & ATTR_CODEC_MASK) == 0
h = header(attributes=0x30)
row.codec = 0
'''
    got = [line for line, _ in wire_number_literals(py, "py")]
    assert got == [1, 3, 3, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 17, 18], wire_number_literals(py, "py")
    pyx = '''\
cdef int f(int codec) noexcept nogil:
    if codec == 3:
        return 1
    elif <int>codec == 1ULL:
        return 2
    if (load_be16(buf + pos + H_ATTRIBUTES) & 7) != CODEC_NONE:
        return 3
    row.is_control = (row.attributes & 0x20) != 0
    cdef int c = attributes & 0x07
    return codec > 3
cdef inline bint g(int attributes) nogil: return attributes & 0x10
def h(self, int codec=0):
    cdef int codec = 4
'''
    got = [line for line, _ in wire_number_literals(pyx, "cython")]
    assert got == [2, 4, 6, 8, 9, 10, 11, 12, 13], wire_number_literals(pyx, "cython")


def test_the_wire_number_check_passes_named_numbers():
    """Self-test: named numbers, other bit twiddling (LZ4 flags, varints), strings and comments pass."""
    py = '''\
if codec == wire.Codec.LZ4 or codec == CODEC_NONE:
    pass
if codec:
    compress(codec, data)
control = attributes & Attr.CONTROL
attributes &= ~ATTR_CODEC_MASK
attributes = codec | (ATTR_TRANSACTIONAL if transactional else 0)
hc_pos = 6 + (8 if flags & 0x08 else 0)
value |= (byte & 0x7F) << 7
attributes = 0
n_codecs = len(codecs)
if n_codecs == 2 or len(codec) == 3:
    pass
_DECOMPRESSORS = {Codec.GZIP: gunzip, Codec.SNAPPY: unsnappy}
w = LogWriter(path, codec="lz4")
x = attributes & 0xFFFF
"codec == 3 in a string"   # attributes & 0x10 in a comment
'''
    assert wire_number_literals(py, "py") == []
    pyx = '''\
"""codec 1 gzip, codec == 3 in a docstring"""
cdef int f(int codec, int attributes) noexcept nogil:
    if codec == CODEC_LZ4:
        return <int>(attributes & ATTR_CODEC)
    row.is_control = (attributes & ATTR_CONTROL) != 0
    raw = (b & 0x7f) | (<uint32_t>c.buf[c.pos + 1] << 7)
    return (tag & 3) == 1   # codec == 1
'''
    assert wire_number_literals(pyx, "cython") == []


def test_cython_statements_are_pythonized_or_left_to_the_fallback():
    """Self-test: the Cython statement reader (lines joined with their numbers kept, casts and & dropped)."""
    assert pythonize("if (<int8_t>buf[pos + H_MAGIC] != 2 or x & 7) != 0u:") == \
        "if (buf[pos + H_MAGIC] != 2 or x & 7) != 0: pass"
    assert pythonize("cdef const uint8_t *p = &buf[0]") == "p = buf[0]"
    assert pythonize("cdef int f(int x) nogil:") is None
    assert pythonize("elif codec == 1: return f(&s,\n&out)") == "if codec == 1: return f(s,\nout)"
    assert pythonize("x = (a & b) + f(a, b & c)") == "x = (a & b) + f(a, b & c)"
    assert pythonize("else:") is None
    stmts = logical_statements('x = (1,\n     2)  # c\ny = "a\\"b"; z = 3\nf(a,\n  b); g(\n c)\n')
    assert stmts == [(1, "x = (1,\n2)"), (3, 'y = ""'), (3, "z = 3"), (4, "f(a,\nb)"), (5, "g(\nc)")]


# --- the compiled decoder ---------------------------------------------------------------

def decoder_constructions(text: str) -> list[int]:
    """Lines that call ``BatchDecoder(...)`` (by any name it was imported as)."""
    tree = ast.parse(text)
    names = {"BatchDecoder"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname for a in node.names if a.name == "BatchDecoder" and a.asname}
        elif isinstance(node, ast.Assign) and _ident(node.value) == "BatchDecoder":
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and _ident(node.func) in names)


def test_one_module_constructs_the_compiled_decoder():
    """``kbatch.lib.decoder`` owns ``BatchDecoder(...)``; the rest call it."""
    makers = [m for m, p in MODULES.items() if p.suffix == ".py" and decoder_constructions(TEXT[p])]
    assert makers == ["kbatch.lib.decoder"]


def test_the_decoder_check_finds_constructions():
    """Self-test: a construction is found under any name; docstrings and annotations are none."""
    assert decoder_constructions("d = _batch.BatchDecoder(v)\n") == [1]
    assert decoder_constructions("from kbatch._core._batch import BatchDecoder as D\nd = D(v)\n") == [2]
    assert decoder_constructions("D = _batch.BatchDecoder\nd = D(v)\n") == [2]
    assert decoder_constructions('"""BatchDecoder(...) in a docstring"""\nx: _batch.BatchDecoder = d\n') == []


# --- one "local or remote?" rule ------------------------------------------------

# where the question may be asked: the door's trees decide, objects.py
# recognises a URL and opens its filesystem
REMOTE_RULE_HOMES = {"kbatch/lib/tree.py": {"is_url", "://", "url_to_fs"},
                     "kbatch/lib/objects.py": {"is_url", "://", "url_to_fs"}}
REMOTE_TELLS = ("is_url", "url_to_fs", "urlparse", "urlsplit", "split_protocol",
                "get_protocol")


def remote_rule_sites(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for each place ``source`` decides "local or remote?"
    by itself: a call of a URL test or an fsspec path splitter, or a string
    holding ``://`` in a comparison, an ``in`` test or a ``startswith``."""
    sites = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name in REMOTE_TELLS:
                sites.append((node.lineno, name))
            elif name in ("startswith", "endswith", "split", "partition", "find") and any(
                    isinstance(a, ast.Constant) and isinstance(a.value, str) and "://" in a.value
                    for a in ast.walk(node) if a is not node.func):
                sites.append((node.lineno, "://"))
        elif isinstance(node, ast.Compare) and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str) and "://" in a.value
                for a in [node.left, *node.comparators]):
            sites.append((node.lineno, "://"))
    return sites


def test_one_local_or_remote_rule():
    """Only the door's trees (``kbatch.lib.tree.is_remote`` / ``tree_of``)
    decide whether a target is local or remote; everything else asks them."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).as_posix()
        allowed = REMOTE_RULE_HOMES.get(rel, set())
        found += [f"{rel}:{line}: {what}" for line, what in
                  remote_rule_sites(path.read_text()) if what not in allowed]
    assert found == []


def test_the_remote_rule_check_finds_sites():
    src = textwrap.dedent('''
        from urllib.parse import urlparse
        def f(p, fs):
            if "://" in p: pass
            if p.startswith(("s3://", "gs://")): pass
            if p.split("://")[0] == "s3": pass
            urlparse(p); fs.split_protocol(p); is_url(p)
            return p.startswith("/") or p == "name"
        ''')
    assert sorted(remote_rule_sites(src)) == [
        (4, "://"), (5, "://"), (6, "://"), (7, "is_url"), (7, "split_protocol"),
        (7, "urlparse")]


def test_every_package_folder_is_installed():
    """pyproject.toml finds the packages (a list named one that was gone and
    every install failed on it): what setuptools finds with its include
    patterns is every folder of kbatch that holds modules, each with an
    __init__.py (a folder without one would be left out of the wheel)."""
    import tomllib
    from setuptools import find_packages
    find = (tomllib.loads((PKG.parent / "pyproject.toml").read_text())
            ["tool"]["setuptools"]["packages"]["find"])
    found = set(find_packages(str(PKG.parent), include=find["include"]))
    folders = {".".join(p.parent.relative_to(PKG.parent).parts)
               for pattern in ("*.py", "*.pyx") for p in PKG.rglob(pattern)
               if "__pycache__" not in p.parts}
    assert found == folders
    assert all((PKG.parent / f.replace(".", "/") / "__init__.py").exists() for f in folders)
