"""The ctypes prototypes of python/mscclrt/_lib.py against the C headers they stand for
(runtime/include/mscclrt.h, compiler/mscclc.h): every bound function is declared there, with the
same number of parameters and, per parameter and for the result, a ctypes type of the same
kind (pointer, integer of the same width, double, struct by value, nothing). A prototype typed
by hand that drifts from the header fails here instead of corrupting a call."""
import ctypes
import re
from pathlib import Path

import pytest

from mscclrt import _lib

ROOT = Path(__file__).resolve().parents[2]
HEADERS = {"runtime": ROOT / "runtime" / "include" / "mscclrt.h",
           "compiler": ROOT / "compiler" / "mscclc.h"}

# C scalar types (after const and names are dropped) and the ctypes kind they take
C_KINDS = {
    "int": "i32", "unsigned": "i32", "uint32_t": "i32", "int32_t": "i32",
    "size_t": "i64", "uint64_t": "i64", "int64_t": "i64", "long long": "i64",
    "double": "f64", "void": "none",
}


def _typedefs(kind: str) -> set:
    """The names the headers give their enums ("enum") or structs ("struct") by typedef."""
    names = set()
    for h in HEADERS.values():
        text = re.sub(r"/\*.*?\*/", " ", h.read_text(), flags=re.S)
        names |= set(re.findall(r"typedef\s+%s\s*\w*\s*\{[^}]*\}\s*(\w+)\s*;" % kind, text))
    return names


ENUMS = _typedefs("enum")        # enums, the result code among them, are ints
BY_VALUE = _typedefs("struct")   # structs passed by value (the unique id)


def c_kind(decl: str) -> str:
    """The kind of a C parameter or result declaration ("const char *name", "int")."""
    d = re.sub(r"\bconst\b", "", decl).strip()
    if "*" in d or "(" in d or "[" in d:
        return "ptr"
    d = re.sub(r"\s+", " ", d)
    words = d.split(" ")
    for n in (2, 1):   # "long long x" before "x"; drop a trailing parameter name
        base = " ".join(words[:n])
        if base in C_KINDS:
            return C_KINDS[base]
        if base in ENUMS:
            return "i32"
        if base in BY_VALUE:
            return "struct"
    if words[0].endswith("_fn"):   # function pointer typedefs
        return "ptr"
    raise AssertionError(f"unknown C type in {decl!r}")


def py_kind(t) -> str:
    if t is None:
        return "none"
    if t in (ctypes.c_void_p, ctypes.c_char_p) or issubclass(t, (ctypes._Pointer, ctypes._CFuncPtr)):
        return "ptr"
    if t is ctypes.c_double:
        return "f64"
    if issubclass(t, ctypes.Structure):
        return "struct"
    if issubclass(t, ctypes._SimpleCData):
        return {4: "i32", 8: "i64"}.get(ctypes.sizeof(t), f"int{ctypes.sizeof(t)}")
    raise AssertionError(f"unknown ctypes type {t!r}")


def header_functions(path: Path) -> dict:
    """name -> (result declaration, [parameter declarations]) of every function declared."""
    text = re.sub(r"/\*.*?\*/", " ", path.read_text(), flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    text = text.replace("MSCCLRT_API", " ")
    out = {}
    for stmt in re.split(r"[;{}]", text):
        m = re.fullmatch(r"\s*([A-Za-z_][\w\s\*]*?)\b((?:mscclrt|mscclc)_\w+)\s*\(([^()]*)\)\s*",
                         stmt, flags=re.S)
        if not m or m.group(1).strip().startswith("typedef"):
            continue
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3).strip()
        ps = [] if params in ("", "void") else [p.strip() for p in params.split(",")]
        out[name] = (ret, ps)
    return out


@pytest.mark.parametrize("which", ["runtime", "compiler"])
def test_prototypes_match_header(which):
    api = _lib._RUNTIME_API if which == "runtime" else _lib._COMPILER_API
    decls = header_functions(HEADERS[which])
    wrong = []
    for name, (res, args) in api.items():
        if name not in decls:
            wrong.append(f"{name}: not declared in {HEADERS[which].name}")
            continue
        cret, cparams = decls[name]
        if len(cparams) != len(args):
            wrong.append(f"{name}: {len(args)} parameters bound, the header has {len(cparams)}")
            continue
        if py_kind(res) != c_kind(cret):
            wrong.append(f"{name}: result bound as {py_kind(res)}, declared {cret!r}")
        for i, (a, c) in enumerate(zip(args, cparams)):
            if py_kind(a) != c_kind(c):
                wrong.append(f"{name}: parameter {i} bound as {py_kind(a)}, declared {c!r}")
    assert not wrong, "\n".join(wrong)


def test_a_drift_is_caught():
    """The check itself: a prototype with a parameter too few or of another width fails."""
    decls = header_functions(HEADERS["runtime"])
    cret, cparams = decls["mscclrt_plan_call_sizes"]
    assert len(cparams) == 4 and c_kind(cret) == "i32"
    assert c_kind(cparams[1]) == "i64" and py_kind(ctypes.c_int) == "i32"
    assert c_kind(cparams[0]) == "ptr" and py_kind(ctypes.c_size_t) == "i64"
