"""The shape of the package (README, "How it works"): imports only point down
the layers, no import cycle, one home for the wire vocabulary.

Layers, bottom up:

    0  kbatch.errors, kbatch.wire        exceptions, the wire vocabulary, the version
    1  kbatch._core                      compiled core (Cython)
    2  kbatch.lib                        decode, partition logs, txns, records, writer
    3  kbatch.internal                   internal topics as tables
    4  kbatch.spark                      integrations
    5  kbatch.tools                      cli, dump, stats, verify, sample, pipeline
       kbatch (the package facade) and kbatch.__main__ sit above all

An import counts wherever it is written (module level or inside a function),
except under ``if TYPE_CHECKING:``.
"""

import ast
import pathlib
import re

import pytest

import kbatch.wire as wire

PKG = \
    pathlib.Path(wire.__file__).resolve().parent

LAYERS = [
    ("kbatch.errors", 0), ("kbatch.wire", 0), ("kbatch._version", 0), ("kbatch._core", 1), ("kbatch.lib", 2),
    ("kbatch.internal", 3), ("kbatch.spark", 4), ("kbatch.tools", 5),
    ("kbatch.__main__", 6), ("kbatch", 6),
]


def layer_of(module: str) -> int:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"{module} is in no layer: add it to a layer package")


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PKG.rglob("*"):
        if path.suffix in (".py", ".pyx") and "__pycache__" not in path.parts:
            out[module_name(path)] = path
    return out


MODULES = all_modules()


def _type_checking_blocks(tree) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for inner in ast.walk(sub):
                    skip.add(id(inner))
    return skip


def _resolve(name: str) -> str | None:
    """The kbatch module an import names (longest existing prefix)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


CIMPORT = re.compile(r"^\s*(?:from\s+(kbatch[\w.]*)\s+cimport|cimport\s+(kbatch[\w.]*))", re.M)


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    text = path.read_text()
    found = set()
    if path.suffix == ".pyx":
        for m in CIMPORT.finditer(text):
            found.add(m.group(1) or m.group(2))
        text = CIMPORT.sub("", text)
        # the Python-level imports of a .pyx: plain 'import'/'from ... import' lines
        for m in re.finditer(r"^\s*(?:from\s+(kbatch[\w.]*)\s+import\s+([\w, ()]+)|import\s+(kbatch[\w.]*))",
                             text, re.M):
            if m.group(3):
                found.add(m.group(3))
            else:
                base = m.group(1)
                for n in re.findall(r"\w+", m.group(2)):
                    found.add(f"{base}.{n}" if _resolve(f"{base}.{n}") == f"{base}.{n}" else base)
    else:
        tree = ast.parse(text)
        skip = _type_checking_blocks(tree)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "kbatch")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                if base.split(".")[0] != "kbatch":
                    continue
                for a in node.names:
                    full = f"{base}.{a.name}"
                    found.add(full if _resolve(full) == full else base)
    return {r for r in (_resolve(n) for n in found) if r and r != module}


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_has_a_layer():
    for m in MODULES:
        layer_of(m)


def test_imports_point_down_the_layers():
    wrong = []
    for m, deps in GRAPH.items():
        for d in deps:
            if layer_of(d) > layer_of(m):
                wrong.append(f"{m} (layer {layer_of(m)}) imports {d} (layer {layer_of(d)})")
            if m != "kbatch" and d == "kbatch":
                wrong.append(f"{m} imports the package facade 'kbatch'; import the module")
    assert not wrong, "\n".join(sorted(wrong))


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    # the package facade imports everything by design; leave it out
    graph = {m: {d for d in deps if d != "kbatch"} for m, deps in GRAPH.items() if m != "kbatch"}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


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


@pytest.mark.parametrize("what,pattern", VOCABULARY, ids=[v[0] for v in VOCABULARY])
def test_one_home_for_the_wire_vocabulary(what, pattern):
    homes = {"kbatch.wire", "kbatch._core._wire"}
    defined = [m for m, p in MODULES.items() if m not in homes and pattern.search(p.read_text())]
    assert defined == [], f"{what} defined outside kbatch/wire.py: {defined}"


def test_one_module_constructs_the_compiled_decoder():
    """``kbatch.lib.decoder`` owns ``BatchDecoder(...)``; the rest call it."""
    makers = [m for m, p in MODULES.items() if p.suffix == ".py"
              and re.search(r"\bBatchDecoder\(", p.read_text())]
    assert makers == ["kbatch.lib.decoder"]


def test_no_module_reaches_into_another_modules_private_names():
    """``from kbatch.x import _name`` only inside one package layer's own
    compiled core (``kbatch._core``) and test-free helpers of the same
    package; a private name is private to its module."""
    reach = re.compile(r"^\s*from (kbatch[\w.]*) import \(?([^)\n]*)", re.M)
    wrong = []
    for m, p in MODULES.items():
        if p.suffix != ".py":
            continue
        for mod, names in reach.findall(p.read_text()):
            for n in re.findall(r"\b(_[a-z]\w*)", names):
                target = f"{mod}.{n}"
                if target in MODULES:          # a private module (kbatch._core._batch)
                    continue
                wrong.append(f"{m}: from {mod} import {n}")
    assert wrong == []
