from __future__ import annotations

import pytest

from local_copilot.privacy.policy import Policy
from local_copilot.prompt.ring import Chunk, ContextRing, containment, dice, line_set


def code(tag: str, n: int = 20) -> list[str]:
    """n distinct, non-trivial lines; different tags share no line."""
    return [f"    value_{tag}_{i} = compute_{tag}(arg_{i}, other={i * 7})" for i in range(n)]


def est(text: str) -> int:
    return len(text.encode("utf-8")) // 4 + 1


def names(chunks: list[Chunk] | tuple[Chunk, ...]) -> list[str]:
    return [c.filename for c in chunks]


def test_similarity_measures() -> None:
    a, b = line_set(["x = 1", "  y = 2", "", "z = 3"]), line_set(["x = 1", "y = 2"])
    assert a == {"x = 1", "y = 2", "z = 3"}  # stripped, blanks dropped
    assert dice(a, b) == pytest.approx(0.8)
    assert containment(b, a) == 1.0 and containment(a, b) == pytest.approx(2 / 3)


def test_dedup_keeps_freshest() -> None:
    ring = ContextRing()
    base = code("a")
    assert ring.add("a.py", base)
    assert ring.add("b.py", code("b"))
    near = base[:-1] + ["    tweaked = 1"]  # 19/20 lines shared: dice 0.95
    assert ring.add("a.py", near)
    assert names(ring.chunks) == ["b.py", "a.py"]
    assert ring.chunks[-1].text == "\n".join(near) + "\n"
    # an exact copy changes nothing (keeps the prompt stable)
    assert not ring.add("a.py", near)
    assert names(ring.chunks) == ["b.py", "a.py"]


def test_eviction_by_count() -> None:
    ring = ContextRing(max_chunks=4)
    for i in range(7):
        assert ring.add(f"f{i}.py", code(str(i)))
    assert names(ring.chunks) == ["f3.py", "f4.py", "f5.py", "f6.py"]
    assert [c.serial for c in ring.chunks] == sorted(c.serial for c in ring.chunks)


def test_window_centred_on_around() -> None:
    ring = ContextRing(chunk_lines=10)
    lines = code("w", 100)
    assert ring.add("w.py", lines, around=50)
    assert ring.chunks[0].text.splitlines() == lines[45:55]
    ring.clear()
    assert ring.add("w.py", lines, around=99)  # clamped at the end, still full size
    assert ring.chunks[0].text.splitlines() == lines[90:100]
    ring.clear()
    assert ring.add("w.py", lines)  # no cursor: first window
    assert ring.chunks[0].text.splitlines() == lines[:10]


def test_similar_to_local_window_is_evicted() -> None:
    ring = ContextRing()
    ring.add("a.py", code("a"))
    ring.add("b.py", code("b"))
    ring.add("c.py", code("c"))
    # the local window (much larger than the chunk) contains most of b's lines
    local = "\n".join(code("local", 200) + code("b")[:15] + ["def f():", "    pass"])
    out = ring.extra_for(local, 10_000, est)
    assert names(out) == ["a.py", "c.py"]
    assert names(ring.chunks) == ["a.py", "c.py"]  # removed from the ring too
    # half or less shared is kept
    ring.add("d.py", code("d"))
    local2 = "\n".join(code("d")[:10])
    assert names(ring.extra_for(local2, 10_000, est)) == ["a.py", "c.py", "d.py"]


@pytest.mark.parametrize("path", [
    ".env", "/p/.env", "/p/.env.local", "/p/.ENV.production", "server.pem", "/etc/ssl/x.key",
    "/home/u/.ssh/id_rsa", "id_rsa.pub", "id_ed25519", "/k/id_ecdsa_sk", "/home/u/.netrc",
    "/home/u/.aws/credentials", "credentials.json", r"C:\Users\u\.env", "/home/u/.ssh/config",
])
def test_secret_files_never_enter(path: str) -> None:
    assert Policy().path_reason(path)
    ring = ContextRing()
    assert not ring.add(path, code("secret"))
    assert not ring.add(path, code("secret"), around=5)
    assert not ring.chunk_from_yank(path, "\n".join(code("secret")))
    assert len(ring) == 0


@pytest.mark.parametrize("path", ["", "main.py", "environment.py", "/p/envs/x.py",
                                  "keyboard.c", "monkey.py", "/p/src/tokens.rs"])
def test_ordinary_files_are_not_secret(path: str) -> None:
    assert Policy().path_reason(path) is None


def test_order_stability() -> None:
    ring = ContextRing()
    for t in "abc":
        ring.add(f"{t}.py", code(t))
    before = ring.extra_for("unrelated = 1", 10_000, est)
    assert ring.add("d.py", code("d"))
    after = ring.extra_for("unrelated = 2", 10_000, est)
    assert after[:3] == before and names(after) == ["a.py", "b.py", "c.py", "d.py"]


def test_budget_respected_dropping_oldest() -> None:
    ring = ContextRing()
    for t in "abcde":
        ring.add(f"{t}.py", code(t))
    costs = [est(c.text) for c in ring.chunks]
    budget = sum(costs[-3:]) + costs[0] // 2  # room for three, not four
    out = ring.extra_for("", budget, est)
    assert names(out) == ["c.py", "d.py", "e.py"]
    assert sum(est(c.text) for c in out) <= budget
    assert len(ring) == 5  # over budget is not a reason to forget
    assert ring.extra_for("", 0, est) == []


def test_yank_chunk() -> None:
    ring = ContextRing(chunk_lines=8)
    yanked = code("y", 30)
    assert ring.chunk_from_yank("y.py", "\n".join(yanked) + "\n")
    assert ring.chunks[0].text.splitlines() == yanked[:8]
    assert ring.chunk_from_yank("z.py", code("z", 5))  # list form (regcontents)
    assert not ring.chunk_from_yank("y.py", "x = 1")  # a one-line yank is too small


def test_tiny_and_blank_chunks_skipped() -> None:
    ring = ContextRing()
    assert not ring.add("a.py", [])
    assert not ring.add("a.py", ["", "   ", "\t"])
    assert not ring.add("a.py", ["}", ")", "]", "end"])  # too few characters
    assert not ring.add("a.py", ["x = compute_something(1)", "y = 2"])  # too few lines
    mostly_blank = [""] * 4 + [code("m")[0]] + [""] * 4 + code("m")[1:3] + [""] * 20 + ["z = 1"]
    assert not ring.add("a.py", mostly_blank)
    assert len(ring) == 0
    # blank edges are trimmed, not counted against a good chunk
    assert ring.add("a.py", ["", ""] + code("ok", 5) + ["", ""])
    assert ring.chunks[0].text == "\n".join(code("ok", 5)) + "\n"


def test_cjk_and_emoji_safe() -> None:
    lines = [f"    msg_{i} = '你好世界 🚀 {i} ありがとう 👩‍👩‍👧'  # 注释" for i in range(12)]
    lines.append("    bad = '\udcff'")  # lone surrogate, as surrogateescape decoding leaves
    ring = ContextRing()
    assert ring.add("ü/日本.py", lines)
    def utf8_est(s: str) -> int:
        return len(s.encode("utf-8", "surrogateescape"))

    out = ring.extra_for("print('x')", 10_000, utf8_est)
    assert out[0].text == "\n".join(lines) + "\n"
    assert ring.extra_for("\n".join(lines), 10_000, utf8_est) == []  # evicted as local


def test_local_key_memoised() -> None:
    ring = ContextRing()
    ring.add("a.py", code("a"))
    local = "\n".join(code("l", 300))
    ring.extra_for(local, 10_000, est)
    key = ring._local_key
    ring.extra_for(local, 10_000, est)
    assert ring._local_key is key


def test_a_full_ring_keeps_its_newest_chunks_and_gives_them_all_where_they_fit() -> None:
    # (its time per call is bench/micro.py's)
    ring = ContextRing()
    for i in range(40):  # more than fits: exercises eviction too
        ring.add(f"f{i}.py", code(f"f{i}", 64))
    assert len(ring) == 16
    local = "\n".join(code("local", 320))
    out = ring.extra_for(local + "\nx = 1", 100_000, est)
    assert len(out) == 16
