"""A FAKE next-edit model on loopback, one per prompt format, for the editor tests: no real
Sweep, Zeta or Zeta-2 model runs on these machines. It reads the prompt as each format's
specification lays it out (the sources are named in python/local_copilot/next_edit/formats.py),
not as this plugin's code happens to write it, and answers the edit a user makes after a
rename: the identifier the last recorded edit renamed is renamed in the editable region too.
With nothing left to rename it answers "no edit" the format's way.

It speaks llama-server's `/props` (the model's name, so the format is detected from it) and a
streamed `/completion` (SSE events, the stop string left out of the text as llama-server
does), and records every prompt.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .fake_server import FakeServer, Step, sse

MODEL = {"sweep": "sweep-next-edit-1.5B.fake.gguf", "zeta": "zeta.fake.gguf", "zeta2": "zeta-2.fake.gguf"}


def _rename(old: str, new: str) -> tuple[str, str] | None:
    """The identifier `old` -> `new` changed (first differing word)."""
    a, b = re.findall(r"\w+", old), re.findall(r"\w+", new)
    for x, y in zip(a, b, strict=False):
        if x != y:
            return x, y
    return None


def _apply(region: str, rename: tuple[str, str] | None) -> str:
    if rename is None:
        return region
    return re.sub(rf"\b{re.escape(rename[0])}\b", rename[1], region)


def _diff_pairs(text: str) -> tuple[str, str] | None:
    """The last -/+ line pair of unified diffs in `text`."""
    minus = [ln[1:] for ln in text.split("\n") if ln.startswith("-") and not ln.startswith("---")]
    plus = [ln[1:] for ln in text.split("\n") if ln.startswith("+") and not ln.startswith("+++")]
    if not minus or not plus:
        return None
    return minus[-1], plus[-1]


def answer_sweep(prompt: str) -> str:
    # sections after <|file_sep|>: "{path}.diff" holds "original:\n...\nupdated:\n...";
    # "current/{path}:{s}:{e}" the region with <|cursor|>; the prompt ends inside
    # "updated/{path}:{s}:{e}\n" with the prefilled rows
    sections = prompt.split("<|file_sep|>")[1:]
    rename = None
    for sec in sections:
        head, _, body = sec.partition("\n")
        if head.endswith(".diff"):
            orig, _, upd = body.partition("updated:\n")
            rename = _rename(orig.removeprefix("original:\n"), upd) or rename
    current = next(sec for sec in sections if sec.startswith("current/"))
    region = current.partition("\n")[2].replace("<|cursor|>", "")
    prefill = sections[-1].partition("\n")[2]
    assert sections[-1].startswith("updated/")
    new = _apply(region, rename)
    assert new.startswith(prefill)
    return new[len(prefill):]


def answer_zeta(prompt: str) -> str:
    edits = prompt.partition("### User Edits:")[2].partition("### User Excerpt:")[0]
    pair = _diff_pairs(edits)
    rename = _rename(*pair) if pair else None
    excerpt = prompt.partition("### User Excerpt:\n\n")[2].partition("\n\n### Response:")[0]
    before, _, rest = excerpt.partition("<|editable_region_start|>\n")
    region, _, after = rest.partition("\n<|editable_region_end|>")
    new = _apply(region.replace("<|user_cursor_is_here|>", ""), rename)
    # the answer repeats the excerpt; the stop string "\n<|editable_region_end|>" ends it
    return before + "<|editable_region_start|>\n" + new


def answer_zeta2(prompt: str) -> str:
    assert prompt.startswith("<[fim-suffix]>") and prompt.endswith("=======\n<[fim-middle]>")
    prefix = prompt.partition("<[fim-prefix]>")[2]
    history = prefix.partition("<filename>edit_history\n")[2].partition("<filename>")[0]
    pair = _diff_pairs(history)
    rename = _rename(*pair) if pair else None
    region = prefix.partition("<<<<<<< CURRENT\n")[2].rpartition("\n=======\n<[fim-middle]>")[0]
    plain = region.replace("<|user_cursor|>", "")
    new = _apply(plain, rename)
    if new == plain:
        return "NO_EDITS\n"
    return new + "\n"  # the stop string ">>>>>>> UPDATED" ends it


ANSWER = {"sweep": answer_sweep, "zeta": answer_zeta, "zeta2": answer_zeta2}


def _tabbed(line: str) -> str:
    body = line.lstrip(" ")
    lead = len(line) - len(body)
    return "\t" * (lead // 4) + " " * (lead % 4) + body


class FakeNextEditModel(FakeServer):
    def __init__(self, fmt: str, *, delay: float = 0.0) -> None:
        self.fmt = fmt
        self.delay = delay  # seconds before the answer starts
        self.cut = False  # end the stream just before the answer is complete (no final event)
        # zeta2: the region written back indented with tabs, each four leading spaces one tab
        # (a model that learnt its indentation from tab-indented code)
        self.tabs = False
        super().__init__(self._script)

    @property
    def prompts(self) -> list[str]:
        return [body["prompt"] for path, body in self.requests if path == "/completion"]

    def _script(self, path: str, body: dict[str, Any]) -> tuple[int, list[Step]]:
        if path == "/props":
            return 200, [json.dumps({"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1,
                                     "model_alias": MODEL[self.fmt]}).encode()]
        if path != "/completion":
            return 404, [b'{"error": "not found"}']
        text = ANSWER[self.fmt](body["prompt"])
        if self.tabs:
            assert self.fmt == "zeta2", "tabs: the zeta2 answer only (the others repeat text around the region)"
            text = "\n".join(_tabbed(line) for line in text.split("\n"))
        pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
        steps: list[Step] = [self.delay] if self.delay else []
        steps += [sse({"content": p, "stop": False}) for p in pieces]
        if self.cut:  # the last piece and the final event never come
            return 200, steps[:-1]
        steps.append(sse({"content": "", "stop": True, "timings": {"predicted_n": len(pieces)}}))
        return 200, steps
