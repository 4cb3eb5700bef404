"""What the post-processor reads (the text around the cursor, the caps, the stop strings)
and what it answers."""

from __future__ import annotations

from typing import Literal

import msgspec

from ...indentation import IndentStyle

# which rules run: all of them; all but the quiet gate (the rules that show nothing for an
# answer the model wrote: it only repeats the lines around the cursor, or holds an invisible
# character); none (the answer as the server wrote it, the served model's stop strings cut).
# The last two are for measuring what the rules add (bench/public_eval.py).
Rules = Literal["all", "no_quiet", "none"]


class PostContext(msgspec.Struct, frozen=True):
    line_prefix: str  # current line text before the cursor
    line_suffix: str  # current line text after the cursor
    next_lines: tuple[str, ...]  # lines below the cursor line (a window, may be empty)
    prev_lines: tuple[str, ...] = ()  # lines above the cursor line, nearest last
    tabstop: int = 8
    max_lines: int = 16  # cap on suggestion lines (the cursor line counts as one)
    stop_strings: tuple[str, ...] = ()  # cut the output at the first one
    filetype: str = ""  # the buffer's ('</s>' is a tag in markup, another family's token elsewhere)
    # the answer is a chat model's (prompt style 'chat'): its wrappers go first (chat_answer.py)
    chat: bool = False
    # spaces typed at the cursor that the prompt left out (pipeline/prepare.py, the continue
    # style): the answer starts with them, and they are in the buffer already
    heal: str = ""
    rules: Rules = "all"
    # the buffer's indentation, which the suggestion's leading whitespace is written in
    # (indentation.py); None: as the model wrote it
    indent: IndentStyle | None = None


class Result(msgspec.Struct, frozen=True):
    text: str  # what to show/insert at the cursor ('' = nothing to show)
    done: bool  # the rest of the stream is not wanted (caller cancels)
