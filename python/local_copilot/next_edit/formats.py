"""Prompt builders and answer readers of the next-edit models, one class per published format.

Each builds one raw completion prompt from the buffer around the cursor and the recent edits
(history.py) and reads the model's answer back as the new text of an editable region; None
means no edit (the model said so, or its answer does not parse). Stable parts come first
where the format allows it (file context, edit history), the region around the cursor last.

Sources (read for the format, written here from them):
- Sweep Next-Edit: the model card https://huggingface.co/sweepai/sweep-next-edit-v2-7B
  ("Prompt format": `<|file_sep|>` file context, recent changes as `original:`/`updated:`
  blocks, `original/`, `current/` with `<|cursor|>`, prefilled `updated/`, each window headed
  `{path}:{start}:{end}`) and the authors' post https://blog.sweep.dev/posts/oss-next-edit
  (Qwen2.5-Coder's `<|file_sep|>` pretraining format, fixed 21-line windows, `{path}.diff`
  blocks); stops `<|file_sep|>`, `<|endoftext|>`.
- Zeta (zed-industries/zeta, Qwen2.5-Coder-7B): Zed's instruction prompt `### Instruction:` /
  `### User Edits:` / `### User Excerpt:` with `<|start_of_file|>`, `<|editable_region_start|>`,
  `<|user_cursor_is_here|>`, `<|editable_region_end|>` / `### Response:`, as
  cursortab/cursortab.nvim server/provider/zeta/zeta.go@b9f9b0a documents it; the markers and
  the edits (`User edited "{path}":` and a fenced unified diff, events apart by a blank line)
  as zed-industries/zed crates/zeta/src/zeta.rs@3afe8c47 writes them. The answer repeats the
  excerpt with the region rewritten.
- Zeta-2 (zed-industries/zeta-2, Seed-Coder-8B; Zed's crates/zeta_prompt `V0211SeedCoder`):
  suffix-prefix-middle `<[fim-suffix]>{after}\\n<[fim-prefix]><filename>edit_history\\n{unified
  diffs}<filename>{path}\\n{before}<<<<<<< CURRENT\\n{region with <|user_cursor|>}\\n=======\\n
  <[fim-middle]>`, answered by the new region and `>>>>>>> UPDATED`, or `NO_EDITS`
  (cursortab server/provider/zeta2/zeta2.go@b9f9b0a, which cites the Zed crate).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..snapshot import byte_to_char_col
from .history import EditEvent, unified_hunk

__all__ = ["FORMATS", "EditContext", "Format", "Prompt", "Sweep", "Zeta", "Zeta2", "detect", "get"]


@dataclass(frozen=True)
class EditContext:
    """The buffer around the cursor, as the editor sent it."""

    path: str
    lines: tuple[str, ...]  # a window of the buffer
    first: int  # 0-based row of lines[0]
    row: int  # cursor row (0-based, in the buffer)
    col: int  # cursor column in bytes

    @property
    def end(self) -> int:
        return self.first + len(self.lines)

    def rows(self, start: int, end: int) -> list[str]:
        return list(self.lines[max(start, self.first) - self.first:min(end, self.end) - self.first])

    def region(self, before: int, after: int) -> tuple[int, int]:
        """Rows [start, end) from `before` rows above the cursor to `after` rows below it."""
        return max(self.first, self.row - before), min(self.end, self.row + after + 1)

    def with_cursor(self, start: int, end: int, marker: str) -> str:
        """Rows [start, end) joined, `marker` at the cursor."""
        rows = self.rows(start, end)
        i = self.row - start
        line = rows[i]
        c = byte_to_char_col(line, self.col)
        rows[i] = line[:c] + marker + line[c:]
        return "\n".join(rows)


@dataclass(frozen=True)
class Prompt:
    text: str
    stop: tuple[str, ...]
    start: int  # the editable region: rows [start, end) of the buffer
    end: int
    old: tuple[str, ...]  # its text as sent
    prefill: str = ""  # the start of the answer, sent at the end of the prompt


class Format:
    name = ""
    markers: tuple[str, ...] = ()  # special tokens the served model should know

    def build(self, ctx: EditContext, events: list[EditEvent]) -> Prompt:
        raise NotImplementedError

    def parse(self, answer: str, prompt: Prompt) -> list[str] | None:
        """The new text of the region, or None (no edit, or an answer that does not parse)."""
        raise NotImplementedError


def _strip_stops(text: str, stops: tuple[str, ...]) -> str:
    for stop in stops:
        i = text.find(stop)
        if i >= 0:
            text = text[:i]
    return text


class Sweep(Format):
    name = "sweep"
    markers = ("<|file_sep|>", "<|endoftext|>")
    stop = ("<|file_sep|>", "<|endoftext|>")
    # the post's fixed 21-line window: 10 rows each side of the cursor
    HALF = 10
    # file context around the cursor
    CONTEXT = 150

    def build(self, ctx: EditContext, events: list[EditEvent]) -> Prompt:
        start, end = ctx.region(self.HALF, self.HALF)
        cur = ctx.rows(start, end)
        parts = [f"<|file_sep|>{ctx.path}\n" + "\n".join(ctx.rows(ctx.row - self.CONTEXT, ctx.row + self.CONTEXT + 1))
                 + "\n"]
        for e in events:
            parts.append(f"<|file_sep|>{e.path}.diff\noriginal:\n" + "".join(s + "\n" for s in e.original)
                         + "updated:\n" + "".join(s + "\n" for s in e.updated))
        span = f"{ctx.path}:{start + 1}:{end}"
        original = self._before_last_edit(ctx, events, start, cur)
        parts.append(f"<|file_sep|>original/{span}\n" + "\n".join(original) + "\n")
        parts.append(f"<|file_sep|>current/{span}\n" + ctx.with_cursor(start, end, "<|cursor|>") + "\n")
        # the model writes the region from the cursor's row on; the rows above it are given
        prefill = "".join(s + "\n" for s in cur[:ctx.row - start])
        parts.append(f"<|file_sep|>updated/{span}\n" + prefill)
        return Prompt("".join(parts), self.stop, start, end, tuple(cur), prefill)

    @staticmethod
    def _before_last_edit(ctx: EditContext, events: list[EditEvent], start: int, cur: list[str]) -> list[str]:
        """The region as it was before the last edit in this file, when that edit lies in it."""
        last = next((e for e in reversed(events) if e.path == ctx.path), None)
        if last is None or last.row < start or last.row + len(last.new) > start + len(cur):
            return cur
        at = last.row - start
        return cur[:at] + list(last.old) + cur[at + len(last.new):]

    def parse(self, answer: str, prompt: Prompt) -> list[str] | None:
        text = prompt.prefill + _strip_stops(answer, self.stop)
        return text.rstrip("\n").split("\n")


class Zeta(Format):
    name = "zeta"
    markers = ()  # plain-text markers in a Qwen2.5-Coder vocabulary
    START, END, CURSOR = "<|editable_region_start|>", "<|editable_region_end|>", "<|user_cursor_is_here|>"
    stop = ("\n<|editable_region_end|>",)
    HALF = 5  # editable rows each side of the cursor
    CONTEXT = 5  # rows of context each side of the region
    INSTRUCTION = ("You are a code completion assistant and your task is to analyze user edits and then rewrite an "
                   "excerpt that the user provides, suggesting the appropriate edits within the excerpt, taking into "
                   "account the cursor location.")

    def build(self, ctx: EditContext, events: list[EditEvent]) -> Prompt:
        start, end = ctx.region(self.HALF, self.HALF)
        edits = "\n\n".join(f'User edited "{e.path}":\n```diff\n{unified_hunk(e)}\n```' for e in events)
        above = ctx.rows(start - self.CONTEXT, start)
        below = ctx.rows(end, end + self.CONTEXT)
        excerpt = f"```{ctx.path}\n"
        if start - len(above) == 0:
            excerpt += "<|start_of_file|>\n"
        excerpt += "".join(s + "\n" for s in above)
        excerpt += f"{self.START}\n{ctx.with_cursor(start, end, self.CURSOR)}\n{self.END}"
        excerpt += "".join("\n" + s for s in below) + "\n```"
        text = (f"### Instruction:\n{self.INSTRUCTION}\n\n### User Edits:\n\n{edits}\n\n"
                f"### User Excerpt:\n\n{excerpt}\n\n### Response:\n")
        return Prompt(text, self.stop, start, end, tuple(ctx.rows(start, end)))

    def parse(self, answer: str, prompt: Prompt) -> list[str] | None:
        i = answer.find(self.START)
        if i < 0:
            return None
        body = answer[i + len(self.START):]
        if not body.startswith("\n"):
            return None
        body = body[1:]
        j = body.find("\n" + self.END)
        if j >= 0:
            body = body[:j]
        elif self.END in body:
            body = body[:body.find(self.END)]
        return body.replace(self.CURSOR, "").split("\n")


class Zeta2(Format):
    name = "zeta2"
    SUFFIX, PREFIX, MIDDLE = "<[fim-suffix]>", "<[fim-prefix]>", "<[fim-middle]>"
    markers = ("<[fim-suffix]>", "<[fim-prefix]>", "<[fim-middle]>")
    CURSOR, NO_EDITS, UPDATED = "<|user_cursor|>", "NO_EDITS", ">>>>>>> UPDATED"
    stop = (">>>>>>> UPDATED",)
    HALF = 10
    CONTEXT = 40

    def build(self, ctx: EditContext, events: list[EditEvent]) -> Prompt:
        start, end = ctx.region(self.HALF, self.HALF)
        after = ctx.rows(end, end + self.CONTEXT)
        before = ctx.rows(start - self.CONTEXT, start)
        text = self.SUFFIX + "".join(s + "\n" for s in after)
        if not after:
            text += "\n"
        text += self.PREFIX
        if events:
            history = "\n".join(f"--- a/{e.path}\n+++ b/{e.path}\n{unified_hunk(e)}\n" for e in events)
            text += f"<filename>edit_history\n{history}\n"
        text += f"<filename>{ctx.path}\n" + "".join(s + "\n" for s in before)
        text += "<<<<<<< CURRENT\n" + ctx.with_cursor(start, end, self.CURSOR) + "\n=======\n" + self.MIDDLE
        return Prompt(text, self.stop, start, end, tuple(ctx.rows(start, end)))

    def parse(self, answer: str, prompt: Prompt) -> list[str] | None:
        body = _strip_stops(answer, self.stop)
        if body.strip().startswith(self.NO_EDITS):
            return None
        lines = body.rstrip("\n").split("\n")
        # a row that held only the cursor marker is not text
        return [s.replace(self.CURSOR, "") for s in lines if s.strip() != self.CURSOR]


FORMATS: dict[str, Format] = {f.name: f for f in (Sweep(), Zeta(), Zeta2())}


def get(name: str) -> Format:
    return FORMATS[name]


def detect(model: str, single_tokens: frozenset[str] = frozenset()) -> str | None:
    """The format the served model speaks: from its name first, else from its vocabulary
    (Seed-Coder's `<[fim-*]>` tokens: Zeta-2; Qwen2.5-Coder's `<|file_sep|>`: Sweep, whose
    format is built on it). None: set `next_edit.format`."""
    name = model.lower().replace("_", "-")
    if "sweep" in name:
        return "sweep"
    if "zeta-2" in name or "zeta2" in name:
        return "zeta2"
    if "zeta" in name:
        return "zeta"
    if all(m in single_tokens for m in Zeta2.markers):
        return "zeta2"
    if "<|file_sep|>" in single_tokens:
        return "sweep"
    return None
