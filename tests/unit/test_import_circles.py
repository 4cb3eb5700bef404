"""No module of the package imports one that imports it back, counting every import: at module
level, inside functions and under `if TYPE_CHECKING:` (scripts/import_circles.py reads them from
the source). A circle of type-only imports still ties the modules together: neither can be read,
tested or moved without the other."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "import_circles.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_circles", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_circle_between_modules_even_counting_type_only_imports() -> None:
    circles = _script()
    assert circles.circles(circles.edges(circles.modules(), runtime=False)) == []


def test_the_check_sees_a_type_only_import(tmp_path: Path) -> None:
    # the check itself: two modules that import each other, one of them for type checking only
    circles = _script()
    pkg = tmp_path / "local_copilot"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import B\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\nB = 1\n")
    circles.ROOT = tmp_path
    mods = circles.modules()
    assert circles.circles(circles.edges(mods, runtime=False)) == [["local_copilot.a", "local_copilot.b"]]
    assert circles.circles(circles.edges(mods, runtime=True)) == []
