"""A file's imports resolved to files of its project, and those files' top-level signatures:
what a model needs to call the code the user imports without guessing names and arguments.

The file is read as saved (the editor's buffer may differ; imports change seldom, and the
language-server surface and the CLI have only the disk). Each language's import forms are
read by a pattern: Python (`import a.b`, `from .x import y`), Lua (`require 'a.b'`),
JavaScript/TypeScript (relative `import … from './x'`, `require('./x')`), C/C++
(`#include "x.h"`), Go (packages of the module in go.mod), Rust (`mod x;`, `use crate::x`).
Only files inside the project (the repository root, found by walking up to `.git`) are read,
each at most MAX_FILE_BYTES; a file the privacy policy refuses (secret names or contents,
`.aiignore` & co.) gives nothing. A file's signatures are its top-level declarations (Python's
through `ast`: classes with their methods and fields, functions, constants; the others by
their declaration lines), those of names the importing file uses first when there are more
than MAX_SIGNATURES.

Work that reads files stays off the keystroke path: `ready()` returns what is known and, when
the file or anything it imports changed on disk, asks a worker thread for the new result,
which the next key gets. `now()` waits for it (the CLI and the language server).
"""

from __future__ import annotations

import ast
import os
import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import msgspec

__all__ = ["Definitions", "Imports", "import_language", "imported_files", "project_root", "signatures"]

MAX_FILE_BYTES = 512 * 1024
MAX_IMPORTS = 8  # files per importing file, in the order it imports them
MAX_SIGNATURES = 40  # lines per imported file
MAX_LINE = 160  # characters per signature line
IMPORT_LINES = 400  # lines of the importing file read for its imports
RECHECK_S = 2.0  # how often ready() looks at the disk again for one file
ROOT_MARKERS = (".git", ".hg", ".jj")

_EXTENSIONS = {
    "python": (".py", ".pyi"), "lua": (".lua",), "javascript": (".js", ".jsx", ".mjs", ".cjs"),
    "typescript": (".ts", ".tsx", ".mts", ".cts"), "c": (".c", ".h"),
    "cpp": (".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".h"), "go": (".go",), "rust": (".rs",),
}
_FILETYPES = {"python": "python", "lua": "lua", "javascript": "javascript", "javascriptreact": "javascript",
              "typescript": "typescript", "typescriptreact": "typescript", "c": "c", "cpp": "cpp",
              "go": "go", "rust": "rust"}


class Definitions(msgspec.Struct, frozen=True):
    """One imported file's signatures; `filename` is relative to the project root."""

    filename: str
    text: str  # signature lines, each ending in "\n"


def import_language(path: str, filetype: str = "") -> str:
    """The language key of a file ("" when its imports are not read)."""
    if filetype in _FILETYPES:
        return _FILETYPES[filetype]
    ext = os.path.splitext(path)[1].lower()
    return next((lang for lang, exts in _EXTENSIONS.items() if ext in exts), "")


def project_root(path: str) -> Path:
    """The nearest directory above `path` holding `.git` (or another VCS's mark); when there is
    none, the folder holding the file's outermost Python package, or the file's own folder."""
    here = Path(path).resolve().parent
    for d in (here, *here.parents):
        if any((d / marker).exists() for marker in ROOT_MARKERS):
            return d
    top = here
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    return top


# -- what a file imports ------------------------------------------------------------------

_PY_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)",
                        re.M)
_PY_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?[ \t]*([\w \t,]*)", re.M)
_LUA_REQUIRE = re.compile(r"""require\s*\(?\s*['"]([\w./-]+)['"]""")
_JS_IMPORT = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"](\.{1,2}/[^'"]+)['"]""")
_C_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
_GO_IMPORT_ONE = re.compile(r'^\s*import\s+(?:\w+\s+)?"([^"]+)"', re.M)
_GO_IMPORT_BLOCK = re.compile(r"^\s*import\s*\(([^)]*)\)", re.M)
_GO_PATH = re.compile(r'"([^"]+)"')
_GO_MODULE = re.compile(r"^\s*module\s+(\S+)", re.M)
_RUST_MOD = re.compile(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;", re.M)
_RUST_USE = re.compile(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?use\s+crate::(\w+)", re.M)


def _first_file(candidates: Iterable[Path]) -> Path | None:
    return next((c for c in candidates if c.is_file()), None)


def _python_module(base: Path, dotted: str) -> Path | None:
    parts = [p for p in dotted.split(".") if p]
    where = base.joinpath(*parts) if parts else base
    return _first_file([where.with_suffix(".py"), where / "__init__.py", where.with_suffix(".pyi")] if parts
                       else [base / "__init__.py"])


def _python_imports(text: str, here: Path, root: Path) -> list[Path]:
    bases = [here, root, root / "src", root / "python", root / "lib"]
    found: list[tuple[int, Path | None]] = []  # (where in the text, file)
    for m in _PY_IMPORT.finditer(text):
        for item in m.group(1).split(","):
            dotted = item.split()[0]
            found.append((m.start(), next((f for b in bases if (f := _python_module(b, dotted))), None)))
    for m in _PY_FROM.finditer(text):
        dots, dotted, names = m.group(1), m.group(2), m.group(3)
        if dots:
            base = here
            for _ in range(len(dots) - 1):
                base = base.parent
            search = [base]
        else:
            search = bases
        for b in search:
            module = _python_module(b, dotted)
            # `from pkg import sub`: a name may be a module of the package
            subs = [_python_module(b, f"{dotted}.{n}") for n in re.findall(r"\w+", names)]
            if module or any(subs):
                found.extend((m.start(), f) for f in (module, *subs))
                break
    return [f for _, f in sorted(found, key=lambda item: item[0]) if f is not None]


def _lua_imports(text: str, here: Path, root: Path) -> list[Path]:
    out: list[Path | None] = []
    for m in _LUA_REQUIRE.finditer(text):
        rel = m.group(1).replace(".", "/")
        out.append(_first_file(base / f"{rel}{tail}" for base in (root / "lua", root, here)
                               for tail in (".lua", "/init.lua")))
    return [p for p in out if p is not None]


def _js_imports(text: str, here: Path, root: Path) -> list[Path]:
    exts = (*_EXTENSIONS["typescript"], *_EXTENSIONS["javascript"], ".d.ts")
    out: list[Path | None] = []
    for m in _JS_IMPORT.finditer(text):
        where = here / m.group(1)
        out.append(_first_file([where, *(Path(f"{where}{e}") for e in exts), *(where / f"index{e}" for e in exts)]))
    return [p for p in out if p is not None]


def _c_imports(text: str, here: Path, root: Path) -> list[Path]:
    return [p for m in _C_INCLUDE.finditer(text)
            if (p := _first_file([here / m.group(1), root / m.group(1), root / "include" / m.group(1)]))]


def _go_imports(text: str, here: Path, root: Path) -> list[Path]:
    mod = root / "go.mod"
    found = _GO_MODULE.search(mod.read_text(errors="replace")) if mod.is_file() else None
    if not found:
        return []
    module = found.group(1)
    paths = [m.group(1) for m in _GO_IMPORT_ONE.finditer(text)]
    for block in _GO_IMPORT_BLOCK.finditer(text):
        paths.extend(_GO_PATH.findall(block.group(1)))
    out: list[Path] = []
    for p in paths:
        if p == module or p.startswith(module + "/"):
            pkg = root / p[len(module):].lstrip("/")
            if pkg.is_dir():
                out.extend(sorted(f for f in pkg.glob("*.go") if not f.name.endswith("_test.go"))[:3])
    return out


def _rust_imports(text: str, here: Path, root: Path, path: Path) -> list[Path]:
    # `mod x;` in lib.rs, main.rs or mod.rs is x.rs beside it, elsewhere in a folder named as the file
    own = here if path.name in ("lib.rs", "main.rs", "mod.rs") else here / path.stem
    out: list[Path | None] = [_first_file([own / f"{m.group(1)}.rs", own / m.group(1) / "mod.rs"])
                              for m in _RUST_MOD.finditer(text)]
    out += [_first_file([root / "src" / f"{m.group(1)}.rs", root / "src" / m.group(1) / "mod.rs"])
            for m in _RUST_USE.finditer(text)]
    return [p for p in out if p is not None]


def imported_files(path: str, text: str, lang: str, root: Path) -> list[Path]:
    """The project files `text` (the file at `path`) imports, those in its folder first, each
    once, never the file itself nor one outside `root`; at most MAX_IMPORTS."""
    me = Path(path).resolve()
    here = me.parent
    if lang == "python":
        found = _python_imports(text, here, root)
    elif lang == "lua":
        found = _lua_imports(text, here, root)
    elif lang in ("javascript", "typescript"):
        found = _js_imports(text, here, root)
    elif lang in ("c", "cpp"):
        found = _c_imports(text, here, root)
    elif lang == "go":
        found = _go_imports(text, here, root)
    elif lang == "rust":
        found = _rust_imports(text, here, root, me)
    else:
        return []
    out: list[Path] = []
    for f in found:
        f = f.resolve()
        if f != me and f not in out and f.is_relative_to(root):
            out.append(f)
    # the file's neighbours first (its own package's modules), then the rest, each in import order
    out.sort(key=lambda f: not f.is_relative_to(here))
    return out[:MAX_IMPORTS]


# -- what an imported file declares --------------------------------------------------------

def _cut(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_LINE else line[:MAX_LINE - 1] + "…"


def _python_header(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    """A def's or class's own lines, decorators and body left out."""
    first, body = node.lineno - 1, node.body[0]
    if body.lineno - 1 == first:  # `def f(): pass`: the line up to its body
        return [_cut(lines[first][:body.col_offset].rstrip())]
    # (a docstring or a body starts on the line after the header's last)
    return [_cut(ln) for ln in lines[first:body.lineno - 1] if ln.strip() and not ln.lstrip().startswith("#")]


def _python_signatures(text: str) -> list[tuple[str, list[str]]]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [(m.group(2), [_cut(m.group(0))]) for m in
                re.finditer(r"^((?:async\s+)?def|class)\s+(\w+).*$", text, re.M)]
    lines = text.split("\n")
    out: list[tuple[str, list[str]]] = []
    for node in tree.body:
        if getattr(node, "name", "").startswith("_"):
            continue  # private: the importing file seldom calls it
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, [*_python_header(lines, node), "    ..."]))
        elif isinstance(node, ast.ClassDef):
            block = _python_header(lines, node)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        (not item.name.startswith("_") or item.name == "__init__"):
                    block += [*_python_header(lines, item), " " * (item.col_offset + 4) + "..."]
                elif isinstance(item, ast.AnnAssign):
                    block.append(_cut(lines[item.lineno - 1]))
            if len(block) == 1:
                block.append("    ...")
            out.append((node.name, block))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names and names[0].isupper() and not names[0].startswith("_"):
                out.append((names[0], [_cut(lines[node.lineno - 1])]))
    return out


_DECLARATIONS = {
    "lua": re.compile(r"^(?:local\s+)?function\s+([\w.:]+)\s*\(.*$|^([\w.]+)\s*=\s*function\s*\(.*$", re.M),
    "javascript": re.compile(
        r"^(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\*?|class|const|let|var)\s+(\w+).*$", re.M),
    "typescript": re.compile(
        r"^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?"
        r"(?:function\*?|class|const|let|var|interface|type|enum)\s+(\w+).*$", re.M),
    "c": re.compile(r"^(?!static\b)(?:[A-Za-z_][\w \t*]*?[\s*])?(\w+)\s*\([^;{]*\)\s*;\s*$"
                    r"|^(?:typedef\s+)?(?:struct|enum|union)\s+(\w+).*$|^#\s*define\s+(\w+).*$", re.M),
    "go": re.compile(r"^func\s+(?:\([^)]*\)\s*)?(\w+).*$|^type\s+(\w+).*$", re.M),
    "rust": re.compile(r"^\s{0,4}(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:unsafe\s+)?"
                       r"(?:fn|struct|enum|trait|type|const|static)\s+(\w+).*$", re.M),
}
_DECLARATIONS["cpp"] = _DECLARATIONS["c"]


def signatures(text: str, lang: str) -> list[tuple[str, list[str]]]:
    """(name, lines) of each top-level declaration of a file's text, in file order."""
    if lang == "python":
        return _python_signatures(text)
    rx = _DECLARATIONS.get(lang)
    if rx is None:
        return []
    out = []
    for m in rx.finditer(text):
        name = next((g for g in m.groups() if g), "")
        line = m.group(0).rstrip()
        if line.endswith("{"):
            line = line[:-1].rstrip()
        out.append((name, [_cut(line)]))
    return out


def _render(decls: list[tuple[str, list[str]]], used: str) -> str:
    """The declarations in file order; over MAX_SIGNATURES lines, those whose names `used`
    holds first."""
    if sum(len(lines) for _, lines in decls) > MAX_SIGNATURES:
        words = set(re.findall(r"\w+", used))
        chosen, room = set(), MAX_SIGNATURES
        for rank in (True, False):
            for i, (name, lines) in enumerate(decls):
                if i not in chosen and (name.split(".")[-1].split(":")[-1] in words) == rank and len(lines) <= room:
                    chosen.add(i)
                    room -= len(lines)
        decls = [d for i, d in enumerate(decls) if i in chosen]
    return "".join(line + "\n" for _, lines in decls for line in lines)


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


# -- the cache, off the keystroke path -----------------------------------------------------

class _Entry:
    __slots__ = ("stamps", "result", "checked", "pending")

    def __init__(self) -> None:
        self.stamps: tuple[tuple[str, int, int], ...] = ()  # (path, mtime_ns, size) of every file read
        self.result: tuple[Definitions, ...] = ()
        self.checked = 0.0
        self.pending = False


def _stamp(path: str) -> tuple[str, int, int]:
    try:
        st = os.stat(path)
        return path, st.st_mtime_ns, st.st_size
    except OSError:
        return path, 0, -1


class Imports:
    """Definitions imported by each file, kept per file and the versions of what it read."""

    def __init__(self) -> None:
        self._policy: Any = None  # what judged the kept results (privacy/policy.py's Policy)
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def ready(self, path: str, filetype: str, policy: Any) -> tuple[Definitions, ...]:
        """What is known for `path` now, never waiting on the disk; a stale or missing result is
        asked of the worker thread for the next call. `policy` (its `refusal(path, lines)`)
        judges every file read; under another policy than the last, nothing kept is used."""
        if not path or not import_language(path, filetype):
            return ()
        self._judged_by(policy)
        entry = self._entries.get(path)
        if entry is None:
            entry = self._entries[path] = _Entry()
        now = time.monotonic()
        if not entry.pending and now - entry.checked >= RECHECK_S:
            entry.pending, entry.checked = True, now
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-copilot-imports")
            self._pool.submit(self._refresh, path, filetype, entry)
        return entry.result

    def now(self, path: str, filetype: str, policy: Any) -> tuple[Definitions, ...]:
        """The definitions for `path`, read now (the CLI and the language server)."""
        if not path or not import_language(path, filetype):
            return ()
        self._judged_by(policy)
        entry = self._entries.setdefault(path, _Entry())
        self._refresh(path, filetype, entry)
        return entry.result

    def _judged_by(self, policy: Any) -> None:
        with self._lock:
            if policy is not self._policy:
                self._policy = policy
                self._entries = {}

    def forget(self, path: str) -> None:
        self._entries.pop(path, None)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _refresh(self, path: str, filetype: str, entry: _Entry) -> None:
        try:
            if entry.stamps and tuple(_stamp(p) for p, _, _ in entry.stamps) == entry.stamps:
                return  # nothing it read changed on disk
            entry.stamps, entry.result = self._read_all(path, filetype)
        except Exception:  # noqa: BLE001 - a file that cannot be read or parsed gives no context
            entry.stamps, entry.result = (_stamp(path),), ()
        finally:
            entry.pending = False

    def _read_all(self, path: str, filetype: str) -> tuple[tuple[tuple[str, int, int], ...], tuple[Definitions, ...]]:
        stamps = [_stamp(path)]
        text = _read(Path(path))
        lang = import_language(path, filetype)
        if text is None or not lang:
            return tuple(stamps), ()
        head = "\n".join(text.split("\n", IMPORT_LINES)[:IMPORT_LINES])
        root = project_root(path)
        with self._lock:
            policy = self._policy
        out: list[Definitions] = []
        for target in imported_files(path, head, lang, root):
            stamps.append(_stamp(str(target)))
            body = _read(target)
            if body is None or (policy is not None and policy.refusal(str(target), body.split("\n")) is not None):
                continue
            rendered = _render(signatures(body, import_language(str(target)) or lang), text)
            if rendered:
                out.append(Definitions(str(target.relative_to(root)), rendered))
        return tuple(stamps), tuple(out)


_LINE_COMMENTS = {
    "python": "#", "sh": "#", "bash": "#", "zsh": "#", "ruby": "#", "perl": "#", "r": "#", "toml": "#",
    "yaml": "#", "make": "#", "cmake": "#", "lua": "--", "sql": "--", "haskell": "--", "vim": '"',
    "lisp": ";", "scheme": ";", "clojure": ";",
    **{ft: "//" for ft in ("c", "cpp", "javascript", "javascriptreact", "typescript", "typescriptreact",
                           "go", "rust", "java", "kotlin", "swift", "cs", "scala", "php", "dart", "zig")},
}


class _FileText(Protocol):
    @property
    def filename(self) -> str: ...

    @property
    def text(self) -> str: ...


def as_comments(defs: Iterable[_FileText], filetype: str) -> str:
    """The definitions as comments in the file's language, to go before a base model's prompt
    (a model without FIM tokens reads text, and another file's code would read as this file's
    start): each under its file name. "" for a language whose line comment is not known."""
    lead = _LINE_COMMENTS.get(filetype.split(".", 1)[0])
    if lead is None:
        return ""
    out = []
    for d in defs:
        out.append(f"{lead} {d.filename}:\n")
        out.extend(f"{lead} {line}\n" if line else f"{lead}\n" for line in d.text.rstrip("\n").split("\n"))
        out.append("\n")
    return "".join(out)
