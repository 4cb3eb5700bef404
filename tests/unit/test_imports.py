"""A file's imports resolved to project files, and their signatures (prompt/imports.py): on
small projects written to disk, with the real privacy policy."""

from __future__ import annotations

import os
import textwrap
import threading
import time
from pathlib import Path

from local_copilot.privacy.policy import Policy
from local_copilot.prompt import imports as imports_module
from local_copilot.prompt.imports import Imports, as_comments, imported_files, project_root, signatures

from ..helpers import wait_for


def _write(root: Path, files: dict[str, str]) -> None:
    (root / ".git").mkdir(exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


GEOMETRY = '''
    """Points in the plane."""
    import math

    ORIGIN = (0.0, 0.0)
    _CACHE = {}


    def scale_points(points, factor, *, origin=ORIGIN):
        """Each point moved away from `origin` by `factor`."""
        ox, oy = origin
        return [(ox + (x - ox) * factor, oy + (y - oy) * factor) for x, y in points]


    def _helper(x):
        return x


    @dataclass
    class Box:
        low: tuple[float, float]
        high: tuple[float, float] = ORIGIN

        def area(self) -> float:
            return 0.0

        def _private(self):
            pass
'''


def test_the_issues_two_file_project_gives_scale_points_signature(tmp_path: Path) -> None:
    _write(tmp_path, {"geometry.py": GEOMETRY, "main.py": "from geometry import scale_points\n\nscale_points(\n"})
    [defs] = Imports().now(str(tmp_path / "main.py"), "python", Policy())
    assert defs.filename == "geometry.py"
    assert defs.text == (
        "ORIGIN = (0.0, 0.0)\n"
        "def scale_points(points, factor, *, origin=ORIGIN):\n"
        "    ...\n"
        "class Box:\n"
        "    low: tuple[float, float]\n"
        "    high: tuple[float, float] = ORIGIN\n"
        "    def area(self) -> float:\n"
        "        ...\n")


def test_python_relative_and_package_imports(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\nfrom .sub.c import thing\nimport pkg.d as d\nimport os\n",
        "pkg/b.py": "def bee(): pass\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "def thing(): pass\n",
        "pkg/d.py": "def dee(): pass\n",
    })
    root = project_root(str(tmp_path / "pkg/a.py"))
    assert root == tmp_path
    text = (tmp_path / "pkg/a.py").read_text()
    got = [p.relative_to(tmp_path).as_posix() for p in imported_files(str(tmp_path / "pkg/a.py"), text, "python", root)]
    assert got == ["pkg/__init__.py", "pkg/b.py", "pkg/sub/c.py", "pkg/d.py"]


def test_other_languages_imports(tmp_path: Path) -> None:
    _write(tmp_path, {
        "lua/plug/init.lua": "local util = require('plug.util')\nlocal x = require 'plug.missing'\n",
        "lua/plug/util.lua": "local M = {}\nfunction M.trim(s)\n  return s\nend\nM.split = function(s, sep)\nend\nreturn M\n",
        "web/app.ts": "import { add } from './math'\nconst y = require('./lib/index')\nimport React from 'react'\n",
        "web/math.ts": "export function add(a: number, b: number): number {\n  return a + b\n}\nexport interface Pair { a: number }\n",
        "web/lib/index.js": "export const VERSION = '1'\n",
        "src/main.c": '#include "util.h"\n#include <stdio.h>\n',
        "src/util.h": "#define MAX 10\nint add(int a, int b);\nstruct point { int x; };\nstatic int hidden(void);\n",
        "go.mod": "module example.com/proj\n\ngo 1.22\n",
        "cmd/main.go": 'package main\n\nimport (\n\t"fmt"\n\tu "example.com/proj/util"\n)\n',
        "util/util.go": "package util\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n\ntype Pair struct {\n}\n",
        "util/util_test.go": "package util\n",
        "rs/src/lib.rs": "mod geo;\npub mod net;\nuse crate::geo::area;\n",
        "rs/src/geo.rs": "pub fn area(w: f64, h: f64) -> f64 {\n    w * h\n}\npub struct Rect { w: f64 }\n",
        "rs/src/net/mod.rs": "pub fn ping() {}\n",
    })
    def rel(path: str, lang: str) -> list[str]:
        p = tmp_path / path
        return [f.relative_to(tmp_path).as_posix() for f in imported_files(str(p), p.read_text(), lang, tmp_path)]
    assert rel("lua/plug/init.lua", "lua") == ["lua/plug/util.lua"]
    assert rel("web/app.ts", "typescript") == ["web/math.ts", "web/lib/index.js"]
    assert rel("src/main.c", "c") == ["src/util.h"]
    assert rel("cmd/main.go", "go") == ["util/util.go"]
    assert rel("rs/src/lib.rs", "rust") == ["rs/src/geo.rs", "rs/src/net/mod.rs"]
    assert [n for n, _ in signatures((tmp_path / "lua/plug/util.lua").read_text(), "lua")] == ["M.trim", "M.split"]
    assert [lines for _, lines in signatures((tmp_path / "web/math.ts").read_text(), "typescript")] == [
        ["export function add(a: number, b: number): number"], ["export interface Pair { a: number }"]]
    assert [n for n, _ in signatures((tmp_path / "src/util.h").read_text(), "c")] == ["MAX", "add", "point"]
    assert [n for n, _ in signatures((tmp_path / "util/util.go").read_text(), "go")] == ["Add", "Pair"]
    assert [n for n, _ in signatures((tmp_path / "rs/src/geo.rs").read_text(), "rust")] == ["area", "Rect"]


def test_files_the_privacy_policy_refuses_give_nothing(tmp_path: Path) -> None:
    _write(tmp_path, {
        "main.py": "import secrets_conf\nimport hidden\nimport geometry\n",
        "secrets_conf.py": 'AWS_KEY = "AKIAIOSFODNN7EXAMPLE"\ndef connect(): pass\n',
        "hidden.py": "def internal(): pass\n",
        ".aiignore": "hidden.py\n",
        "geometry.py": GEOMETRY,
    })
    got = Imports().now(str(tmp_path / "main.py"), "python", Policy())
    assert [d.filename for d in got] == ["geometry.py"]
    assert "AKIA" not in "".join(d.text for d in got)
    # and a policy that excludes the file by name
    got = Imports().now(str(tmp_path / "main.py"), "python", Policy(exclude=["**/geometry.py"]))
    assert got == ()


def test_ready_never_waits_and_sees_a_change_on_disk(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("local_copilot.prompt.imports.RECHECK_S", 0.0)
    _write(tmp_path, {"main.py": "import geometry\n", "geometry.py": "def one(): pass\n"})
    imports, policy, main = Imports(), Policy(), str(tmp_path / "main.py")
    # a slow disk: reading the file waits until the test lets it go
    disk = threading.Event()
    read = imports_module._read
    monkeypatch.setattr(imports_module, "_read", lambda path: disk.wait(10) and read(path))
    try:
        assert imports.ready(main, "python", policy) == ()  # the worker reads; the key goes on
        assert imports.ready(main, "python", policy) == ()
        disk.set()
        wait_for(lambda: imports.ready(main, "python", policy) != (), timeout=10)
        assert imports.ready(main, "python", policy)[0].text == "def one():\n    ...\n"
        geometry = tmp_path / "geometry.py"
        geometry.write_text("def two(a, b): pass\n")
        os.utime(geometry, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
        # the worker may read the file half written (empty) first: wait for what it says once saved
        wait_for(lambda: [d.text for d in imports.ready(main, "python", policy)] == ["def two(a, b):\n    ...\n"], timeout=10)
    finally:
        imports.close()


def test_definitions_as_comments_for_a_base_models_prompt(tmp_path: Path) -> None:
    _write(tmp_path, {"geometry.py": "def one(a): pass\n", "main.py": "import geometry\n"})
    defs = Imports().now(str(tmp_path / "main.py"), "python", Policy())
    assert as_comments(defs, "python") == "# geometry.py:\n# def one(a):\n#     ...\n\n"
    assert as_comments(defs, "lua").startswith("-- geometry.py:\n")
    assert as_comments(defs, "unknownft") == ""
