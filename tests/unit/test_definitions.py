"""The language servers' definitions kept per buffer (prompt/definitions.py) and how a prompt
holds them (pipeline/prepare.py): on the issue's two-file project written to disk, with the
real privacy policy."""

from __future__ import annotations

from pathlib import Path

from local_copilot.config import load_config
from local_copilot.pipeline.prepare import Preparer
from local_copilot.privacy.policy import Policy
from local_copilot.prompt.definitions import LspDefinitions
from local_copilot.snapshot import Snapshot

SCALE = ('def scale_points(points, factor, *, origin=(0.0, 0.0)):\n'
         '    """Each point moved away from `origin` by `factor`."""\n'
         '    ox, oy = origin\n'
         '    return [(ox + (x - ox) * factor, oy + (y - oy) * factor) for x, y in points]')
GEOMETRY = f'"""Points in the plane."""\n\n\n{SCALE}\n\n\ndef area(box):\n    return 0.0\n'
MAIN = "from geometry import scale_points\n\ncorners = [(0, 0), (1, 0), (1, 1)]\nbigger = scale_points(\n"


def _project(root: Path) -> tuple[str, str]:
    (root / ".git").mkdir()
    (root / "pkg").mkdir()
    (root / "pkg" / "geometry.py").write_text(GEOMETRY)
    (root / "main.py").write_text(MAIN)
    return str(root / "main.py"), str(root / "pkg" / "geometry.py")


def test_definitions_are_named_in_the_project_and_those_of_one_file_go_together(tmp_path: Path) -> None:
    main, geometry = _project(tmp_path)
    defs, policy = LspDefinitions(), Policy()
    defs.put(1, main, [(geometry, SCALE), (geometry, "def area(box):\n    return 0.0"), (geometry, SCALE),
                       (main, "corners = [(0, 0), (1, 0), (1, 1)]"), ("/usr/lib/python3/os.py", "def getcwd(): ...")],
             policy)
    got = defs.get(1, policy)
    # the project's file by its path in the project, one outside it by its name alone (one of
    # the buffer's own file far from the cursor, which Lua sends, too)
    assert [(d.filename, d.text) for d in got] == [
        ("pkg/geometry.py", SCALE + "\ndef area(box):\n    return 0.0\n"),
        ("main.py", "corners = [(0, 0), (1, 0), (1, 1)]\n"),
        ("os.py", "def getcwd(): ...\n"),
    ]
    assert defs.get(2, policy) == ()
    defs.forget(1)
    assert defs.get(1, policy) == ()


def test_a_definition_in_a_secret_or_ignored_file_or_holding_a_credential_is_never_kept(tmp_path: Path) -> None:
    main, geometry = _project(tmp_path)
    (tmp_path / ".aiignore").write_text("pkg/geometry.py\n")
    env = str(tmp_path / ".env")
    defs = LspDefinitions()
    policy = Policy()
    defs.put(1, main, [(geometry, SCALE), (env, "API_URL = 'x'"),
                       (str(tmp_path / "conf.py"), 'AWS_KEY = "AKIAIOSFODNN7EXAMPLE"'),
                       (str(tmp_path / "ok.py"), "def fine(): pass")], policy)
    assert [d.filename for d in defs.get(1, policy)] == ["ok.py"]
    # another policy judges what was sent anew: one that excludes ok.py too leaves nothing
    stricter = Policy(exclude=["**/ok.py"])
    assert defs.get(1, stricter) == ()
    # a file that becomes a link to a secret one after its definition was kept (the editor
    # says so: path_changed) is not sent again
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host x\n")
    (tmp_path / "ok.py").write_text("def fine(): pass\n")
    defs.put(1, main, [(str(tmp_path / "ok.py"), "def fine(): pass")], policy)
    assert [d.filename for d in defs.get(1, policy)] == ["ok.py"]
    (tmp_path / "ok.py").unlink()
    (tmp_path / "ok.py").symlink_to(tmp_path / ".ssh" / "config")
    policy.forget_path(str(tmp_path / "ok.py"))
    assert defs.get(1, policy) == ()


def _snap(main: str) -> Snapshot:
    lines = MAIN.split("\n")
    return Snapshot(buf=1, tick=1, row=3, col=len(lines[3]), first=0, lines=lines, nlines=len(lines), ft="python",
                    path=main, seq=1)


def test_a_prompt_holds_the_definitions_first_and_an_imported_file_they_come_from_once(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "geometry.py").write_text(GEOMETRY)
    (tmp_path / "main.py").write_text(MAIN)
    main = str(tmp_path / "main.py")
    prep = Preparer()
    cfg = load_config({})
    prep.imports.now(main, "python", prep.ring.policy)  # the imported signatures known
    prep.prepare(_snap(main), cfg, 8192, ())
    imported = prep.sources
    assert imported == (("imports", "geometry.py"),)
    prep.definitions.put(1, main, [(str(tmp_path / "geometry.py"), SCALE)], prep.ring.policy)
    p = prep.prepare(_snap(main), cfg, 8192, ())
    # the definition with its body, not the file's signatures beside it
    assert [(c.filename, c.text) for c in p.req.extra] == [("geometry.py", SCALE + "\n")]
    assert p.sources == (("lsp", "geometry.py"),)
    # a base model reads it as comments before the file
    p = prep.prepare(_snap(main), cfg, 8192, (), style="continue")
    assert p.req.prefix.startswith("# geometry.py:\n# def scale_points(points, factor, *, origin=(0.0, 0.0)):\n"
                                   "#     \"\"\"Each point")
    assert p.req.extra == ()
    # turned off by the option, or by a measurement
    assert prep.prepare(_snap(main), load_config({"context": {"lsp": False}}), 8192, ()).sources == imported
    prep.sources_on = frozenset({"headers", "imports", "ring"})
    assert prep.prepare(_snap(main), cfg, 8192, ()).sources == imported


def test_definitions_share_the_token_budget_of_the_repository_context(tmp_path: Path) -> None:
    main, geometry = _project(tmp_path)
    prep = Preparer()
    big = "def huge():\n" + "".join(f"    step_{i} = compute(step_{i - 1})\n" for i in range(400))
    prep.definitions.put(1, main, [(geometry, big), (str(tmp_path / "small.py"), "def small(): pass")], prep.ring.policy)
    p = prep.prepare(_snap(main), load_config({"context": {"extra_tokens": 200}}), 8192, ())
    # the one over the budget is left out; the next still fits
    assert [c.filename for c in p.req.extra] == ["small.py"]
    # of two that fit only one at a time, the newer (nearer the cursor) is kept
    half = "def half():\n" + "".join(f"    step_{i} = compute(step_{i - 1})\n" for i in range(5))  # ~72 tokens
    prep.definitions.put(1, main, [(str(tmp_path / "old.py"), half), (str(tmp_path / "new.py"), half)], prep.ring.policy)
    p = prep.prepare(_snap(main), load_config({"context": {"extra_tokens": 100}}), 8192, ())
    assert [c.filename for c in p.req.extra] == ["new.py"]
    assert prep.prepare(_snap(main), load_config({"context": {"extra_tokens": 0}}), 8192, ()).req.extra == ()
