"""Cross-file context: a ring of text chunks from other buffers, yanks and cursor jumps.

Modelled on llama.vim's ring (16 chunks x 64 lines, dedup > 0.9, evict > 0.5 similar to the
local window). Similarity works on *line sets*: each line stripped of surrounding whitespace,
blank lines ignored (so re-indenting does not defeat dedup, and common keywords do not make
unrelated code look alike the way word-token sets would).

- Dedup between chunks: Dice coefficient, 2|A∩B| / (|A|+|B|) (symmetric: same-size windows).
- Eviction against the local window: containment, |A∩L| / |A|, the share of the chunk's lines
  the local window already shows. Dice would under-count here: a 64-line chunk lying wholly
  inside a 320-line local window scores only 0.33 and would never be evicted, yet it is exactly
  the chunk that makes the model echo text that is already there.

Pure Python, deterministic (insertion serials, no clock, no randomness), no I/O. What enters
is judged by the privacy policy (privacy.py): a refused file's text, or text holding a
credential, never enters. A long line enters cut (long_lines.py), as in the local window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import msgspec

from ..privacy.policy import Policy
from .long_lines import cut_lines

__all__ = ["Chunk", "ContextRing", "containment", "dice", "line_set"]

MIN_LINES = 3  # non-blank lines; a one-liner says nothing the local window cannot
MIN_CHARS = 32  # non-whitespace characters; skips chunks of lone brackets
MIN_FILL = 1 / 3  # share of non-blank lines; a mostly blank window wastes prompt tokens


def line_set(lines: Iterable[str]) -> frozenset[str]:
    """The similarity key: stripped, non-blank lines."""
    return frozenset(s for s in (ln.strip() for ln in lines) if s)


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return 2.0 * len(a & b) / (len(a) + len(b))


def containment(chunk: frozenset[str], local: frozenset[str]) -> float:
    """Share of `chunk`'s lines that also appear in `local`."""
    if not chunk:
        return 1.0
    return len(chunk & local) / len(chunk)  # & iterates the smaller set: O(min)


class Chunk(msgspec.Struct, frozen=True):
    """A piece of another file (or a yank) to show the model; `text` ends with a newline."""

    filename: str
    text: str
    key: frozenset[str]  # line_set(text), computed once at insertion
    serial: int  # insertion order; larger is fresher


class ContextRing:
    """At most `max_chunks` chunks, oldest first; the prompt lists them in this order."""

    def __init__(self, max_chunks: int = 16, chunk_lines: int = 64,
                 dedup_threshold: float = 0.9, evict_threshold: float = 0.5,
                 policy: Policy | None = None) -> None:
        if max_chunks < 1 or chunk_lines < 1:
            raise ValueError("max_chunks and chunk_lines must be >= 1")
        self.max_chunks = max_chunks
        self.chunk_lines = chunk_lines
        self.dedup_threshold = dedup_threshold
        self.evict_threshold = evict_threshold
        self.policy = policy or Policy()
        self._chunks: list[Chunk] = []
        self._serial = 0
        # extra_for runs per keystroke, often with the same window (cache warm-up, prefetch)
        self._local_text: str | None = None
        self._local_key: frozenset[str] = frozenset()

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return tuple(self._chunks)

    def __len__(self) -> int:
        return len(self._chunks)

    def clear(self) -> None:
        self._chunks.clear()

    def drop(self, filename: str) -> None:
        """The file's text was found to hold a credential: none of it stays."""
        self._chunks = [c for c in self._chunks if c.filename != filename]

    def use_policy(self, policy: Policy) -> None:
        """New options: chunks the new policy refuses leave the ring."""
        self.policy = policy
        self._chunks = [c for c in self._chunks if policy.refusal(c.filename, c.text.split("\n")) is None]

    def _window(self, lines: Sequence[str], around: int | None) -> Sequence[str]:
        n, size = len(lines), self.chunk_lines
        # the first window (deterministic, and where a yank starts), else centred on `around`
        start = 0 if around is None or n <= size else min(max(0, around - size // 2), n - size)
        window = lines[start:start + size]
        # trim blank edges so the same code seen from nearby cursors gives the same text
        lo, hi = 0, len(window)
        while lo < hi and not window[lo].strip():
            lo += 1
        while hi > lo and not window[hi - 1].strip():
            hi -= 1
        return window[lo:hi]

    @staticmethod
    def _worth_it(window: Sequence[str]) -> bool:
        filled = [ln for ln in window if ln.strip()]
        if len(filled) < MIN_LINES or len(filled) < MIN_FILL * len(window):
            return False
        return sum(len("".join(ln.split())) for ln in filled) >= MIN_CHARS

    def add(self, filename: str, lines: Sequence[str], *, around: int | None = None) -> bool:
        """Add a window of `lines` (centred on index `around` if given); True if the ring changed.

        An exact copy already in the ring stays where it is (moving it would change the
        prompt's beginning for nothing); a near-duplicate replaces the older chunk at the end.
        """
        if self.policy.path_reason(filename) is not None:
            return False
        window = self._window(lines, around)
        if not self._worth_it(window) or self.policy.text_reason(window) is not None:
            return False
        window = cut_lines(window)
        text = "\n".join(window) + "\n"
        if any(c.filename == filename and c.text == text for c in self._chunks):
            return False
        key = line_set(window)
        self._chunks = [c for c in self._chunks if dice(c.key, key) <= self.dedup_threshold]
        self._serial += 1
        self._chunks.append(Chunk(filename, text, key, self._serial))
        if len(self._chunks) > self.max_chunks:
            del self._chunks[: len(self._chunks) - self.max_chunks]
        return True

    def chunk_from_yank(self, filename: str, text: str | Sequence[str]) -> bool:
        """TextYankPost: add the yanked lines (first `chunk_lines` of a long yank)."""
        lines = text.split("\n") if isinstance(text, str) else text
        return self.add(filename, lines)

    def _local(self, local_text: str) -> frozenset[str]:
        if local_text is not self._local_text and local_text != self._local_text:
            self._local_text = local_text
            self._local_key = line_set(local_text.split("\n"))
        return self._local_key

    def extra_for(self, local_text: str, budget_tokens: int,
                  estimate: Callable[[str], int]) -> list[Chunk]:
        """Chunks to send with a request, oldest first, costing at most `budget_tokens`.

        Chunks mostly shown by the local window already are removed from the ring: they make
        the model repeat existing text. `estimate` should include any per-chunk template cost.
        Over budget, the oldest go first (the fresh ones are likelier to matter).
        """
        if self._chunks:
            local = self._local(local_text)
            self._chunks = [c for c in self._chunks
                            if containment(c.key, local) <= self.evict_threshold]
        costs = [estimate(c.text) for c in self._chunks]
        total, first = sum(costs), 0
        while first < len(costs) and total > budget_tokens:
            total -= costs[first]
            first += 1
        return self._chunks[first:]
