"""The Preparer (pipeline/prepare.py): a snapshot into the request a server gets. What the
request holds besides the window, in which order, within which budget, in which prompt style."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_copilot.config import load_config
from local_copilot.errors import ConfigError
from local_copilot.pipeline.prepare import SOURCES, Preparer
from local_copilot.privacy.policy import Policy
from local_copilot.snapshot import Snapshot

MAIN = ["from geometry import scale_points", "", "corners = [(0, 0), (1, 0)]", "bigger = scale_points("]


def _project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "geometry.py").write_text("def scale_points(points, factor):\n    return points\n")
    main = tmp_path / "main.py"
    main.write_text("\n".join(MAIN) + "\n")
    return main


def _snap(main: Path, buf: int = 1) -> Snapshot:
    return Snapshot(buf=buf, tick=1, row=3, col=len(MAIN[3]), first=0, lines=list(MAIN), nlines=len(MAIN),
                    ft="python", path=str(main), et=True, sw=4, ts=8, seq=1)


def _ready(tmp_path: Path, **context: object) -> tuple[Preparer, Snapshot, object]:
    main = _project(tmp_path)
    prep = Preparer()
    prep.ring.use_policy(Policy())
    policy = prep.ring.policy
    prep.imports.now(str(main), "python", policy)  # (the editor's first key asks; the next have it)
    prep.definitions.put(1, str(main), [(str(tmp_path / "geometry.py"), "def scale_points(points, factor):")], policy)
    other = tmp_path / "notes.py"
    # (short: an unmeasured server's window leaves the context ~128 tokens, prepare.py)
    prep.ring.add(str(other), [f"note_{i} = note({i})" for i in range(8)])
    cfg = load_config({"context": context} if context else {})
    return prep, _snap(main), cfg


def test_the_language_servers_definitions_then_imports_then_other_buffers(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    p = prep.prepare(snap, cfg, 8192, ())
    # geometry.py's definition came from the language server: its imported signature is not
    # sent again under the same name
    assert [c.filename for c in p.req.extra] == ["geometry.py", str(tmp_path / "notes.py")]
    assert p.req.extra[0].text == "def scale_points(points, factor):\n"
    assert [s for s, _ in p.sources] == ["lsp", "ring"]
    assert prep.sources == p.sources


def test_imports_come_in_when_no_language_server_found_the_file(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    prep.definitions.forget(1)
    p = prep.prepare(snap, cfg, 8192, ())
    assert p.req.extra[0].filename == "geometry.py"
    assert p.req.extra[0].text == "def scale_points(points, factor):\n    ...\n"
    assert [s for s, _ in p.sources] == ["imports", "ring"]


def test_each_source_can_be_turned_off(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    for off in ("lsp", "imports", "ring"):
        prep.sources_on = SOURCES - {off}
        assert off not in {s for s, _ in prep.prepare(snap, cfg, 8192, ()).sources}
    prep.sources_on = frozenset()
    assert prep.prepare(snap, cfg, 8192, ()).req.extra == ()
    prep.sources_on = SOURCES
    assert prep.prepare(snap, load_config({"context": {"lsp": False}}), 8192, ()).sources[0][0] == "imports"


def test_nothing_besides_the_window_without_extra_tokens(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path, extra_tokens=0)
    p = prep.prepare(snap, cfg, 8192, ())
    assert p.req.extra == () and p.sources == ()


def test_what_does_not_fit_the_budget_is_left_out(tmp_path: Path) -> None:
    # room for the definition (about 16 tokens with its file's overhead), not for the chunk
    prep, snap, cfg = _ready(tmp_path, extra_tokens=24)
    p = prep.prepare(snap, cfg, 8192, ())
    assert [s for s, _ in p.sources] == ["lsp"]


def test_a_base_model_gets_the_definitions_as_comments_and_no_other_buffers(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    p = prep.prepare(snap, cfg, 8192, (), style="continue")
    assert p.req.extra == () and p.req.suffix == ""
    assert p.req.prefix == ("# geometry.py:\n# def scale_points(points, factor):\n\n"
                            "from geometry import scale_points\n\ncorners = [(0, 0), (1, 0)]\n")
    assert [s for s, _ in p.sources] == ["lsp"]
    # what the post-processor knows of the buffer is the window, not the comments
    assert p.pctx.prev_lines == tuple(MAIN[:3])


def test_a_definition_from_a_refused_file_is_never_sent(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    secret = tmp_path / ".env"
    prep.definitions.put(1, snap.path, [(str(secret), "TOKEN = load()")], prep.ring.policy)
    prep.imports.forget(snap.path)
    p = prep.prepare(snap, cfg, 8192, ())
    assert ".env" not in repr(p.req.extra) and "TOKEN" not in repr(p.req.extra)


def test_a_context_too_small_for_n_predict_says_what_to_change() -> None:
    with pytest.raises(ConfigError, match=r"only 200 tokens.*n_predict=128.*larger context per slot"):
        Preparer().budget(200, load_config({"n_predict": 128}))


def test_repository_context_gets_at_most_a_third_of_the_servers_context() -> None:
    prep = Preparer()
    budget, extra = prep.budget(2048, load_config({"context": {"extra_tokens": 4096}}))
    assert budget is not None and extra == budget // 3
    assert prep.budget(None, load_config({})) == (None, 1024)


def _edit(prep: Preparer, path: Path, row: int, new: list[str], buf: int = 2) -> bool:
    return prep.edits.put(buf, str(path), row, new, ["# above"], ["# below"], prep.ring.policy)


def test_recent_edits_elsewhere_come_after_the_definitions_newest_nearest_the_window(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    prep.ring.clear()
    assert _edit(prep, tmp_path / "shapes.py", 10, ["def area(box):"])
    assert _edit(prep, tmp_path / "shapes.py", 40, ["def perimeter(box):"])
    p = prep.prepare(snap, cfg, 8192, ())
    # under the file's name in its project, the rows around the edit kept; the oldest first
    assert [(c.filename, c.text) for c in p.req.extra[1:]] == [
        ("shapes.py", "# above\ndef area(box):\n# below\n"), ("shapes.py", "# above\ndef perimeter(box):\n# below\n")]
    assert p.sources == (("lsp", "geometry.py"), ("edits", "shapes.py"), ("edits", "shapes.py"))


def test_the_newest_edits_are_kept_when_not_all_fit(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path, extra_tokens=60)
    # the edits alone compete for the room (a forgotten file's imports may be read again by
    # the worker before ready() returns)
    prep.sources_on = frozenset({"edits"})
    for i in range(6):
        _edit(prep, tmp_path / f"m{i}.py", 0, [f"value_{i} = compute_something({i})"])
    p = prep.prepare(snap, cfg, 8192, ())
    names = [f for _, f in p.sources]
    assert 0 < len(names) < 6
    assert names == [f"m{i}.py" for i in range(6 - len(names), 6)]


def test_an_edit_the_window_shows_is_left_to_it_and_a_far_one_in_the_same_file_is_sent(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    prep.ring.clear()
    prep.edits.put(1, snap.path, 2, ["corners = [(0, 0), (1, 0)]"], [], [], prep.ring.policy)
    assert "edits" not in {s for s, _ in prep.prepare(snap, cfg, 8192, ()).sources}
    prep.edits.put(1, snap.path, 400, ["far_away = 1"], [], [], prep.ring.policy)
    p = prep.prepare(snap, cfg, 8192, ())
    assert ("edits", "main.py") in p.sources and "far_away = 1\n" in [c.text for c in p.req.extra]
    assert "corners" not in "".join(c.text for c in p.req.extra)


def test_edits_are_off_with_the_option_and_forgotten_with_their_buffer(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    _edit(prep, tmp_path / "shapes.py", 10, ["def area(box):"])
    assert ("edits", "shapes.py") in prep.prepare(snap, cfg, 8192, ()).sources
    off = load_config({"context": {"edits": False}})
    assert "edits" not in {s for s, _ in prep.prepare(snap, off, 8192, ()).sources}
    prep.sources_on = SOURCES - {"edits"}
    assert "edits" not in {s for s, _ in prep.prepare(snap, cfg, 8192, ()).sources}
    prep.sources_on = SOURCES
    prep.forget_buffer(2)
    assert "edits" not in {s for s, _ in prep.prepare(snap, cfg, 8192, ()).sources}


def test_an_edit_in_a_refused_file_is_never_sent(tmp_path: Path) -> None:
    (tmp_path / ".aiignore").write_text("private.py\n")
    prep, snap, cfg = _ready(tmp_path)
    assert not _edit(prep, tmp_path / ".env", 0, ["TOKEN = load()"])
    assert not _edit(prep, tmp_path / "private.py", 0, ["hidden_plan = 1"])
    assert not _edit(prep, tmp_path / "keys.py", 0, ["-----BEGIN RSA PRIVATE KEY-----"])
    assert not _edit(prep, tmp_path / "gone.py", 0, [])  # (lines deleted: nothing new to show)
    p = prep.prepare(snap, cfg, 8192, ())
    assert "edits" not in {s for s, _ in p.sources}
    assert "TOKEN" not in repr(p.req.extra) and "hidden_plan" not in repr(p.req.extra)


def _edits_in(p: object) -> list[str]:
    return [f for s, f in p.sources if s == "edits"]  # type: ignore[attr-defined]


def test_a_buffer_keeps_its_edits_while_its_window_stays(tmp_path: Path) -> None:
    # an edit of another file, made while the user was there, joins this buffer's prompt once its window
    # moves or the hold is over, not at the first key back (the server would evaluate the whole
    # window again); an edit of its own file joins at once
    prep, snap, cfg = _ready(tmp_path)
    _edit(prep, tmp_path / "shapes.py", 10, ["def area(box):"])
    assert _edits_in(prep.prepare(snap, cfg, 8192, ())) == ["shapes.py"]
    _edit(prep, tmp_path / "walls.py", 5, ["def height(wall):"], buf=3)
    assert _edits_in(prep.prepare(snap, cfg, 8192, ())) == ["shapes.py"]
    prep.edits.put(1, snap.path, 400, ["far_away = 1"], [], [], prep.ring.policy)  # its own file, far down
    assert _edits_in(prep.prepare(snap, cfg, 8192, ())) == ["shapes.py", "main.py"]
    assert _edits_in(prep.prepare(snap, cfg, 8192, ())) == ["shapes.py", "main.py"]


def test_a_held_edit_joins_after_the_hold_even_where_the_window_never_moves(tmp_path: Path, monkeypatch) -> None:
    prep, snap, cfg = _ready(tmp_path)
    prep.prepare(snap, cfg, 8192, ())
    _edit(prep, tmp_path / "walls.py", 5, ["def height(wall):"], buf=3)
    assert _edits_in(prep.prepare(snap, cfg, 8192, ())) == []
    monkeypatch.setattr("local_copilot.pipeline.prepare.EDITS_HOLD_S", 0.0)
    assert _edits_in(prep.prepare(snap, cfg, 8192, ())) == ["walls.py"]


def test_a_buffer_whose_window_moved_takes_the_new_edits(tmp_path: Path) -> None:
    prep, snap, cfg = _ready(tmp_path)
    long = [f"row_{i} = {i}" for i in range(600)]
    far = Snapshot(buf=1, tick=1, row=300, col=0, first=0, lines=long, nlines=len(long), ft="python",
                   path=snap.path, et=True, sw=4, ts=8, seq=1)
    prep.prepare(far, cfg, 8192, ())
    _edit(prep, tmp_path / "walls.py", 5, ["def height(wall):"], buf=3)
    assert "walls.py" not in _edits_in(prep.prepare(far, cfg, 8192, ()))
    moved = Snapshot(buf=1, tick=2, row=500, col=0, first=0, lines=long, nlines=len(long), ft="python",
                     path=snap.path, et=True, sw=4, ts=8, seq=2)
    assert "walls.py" in _edits_in(prep.prepare(moved, cfg, 8192, ()))
