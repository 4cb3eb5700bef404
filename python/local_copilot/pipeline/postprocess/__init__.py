"""Turn a raw (streamed) FIM completion into the ghost text to show at the cursor."""

from __future__ import annotations

from .compose import (
    PostContext,
    Result,
    block_indent,
    closer_cut,
    cut_stop_strings,
    drop_duplicate_closer,
    drop_suffix_repeat,
    existing_line_cut,
    finish,
    indent_width,
    keep_first_line,
    leaves_block,
    only_repeats,
    process,
    repeat_cut,
    repeat_holdback,
)

__all__ = [
    "PostContext",
    "Result",
    "block_indent",
    "closer_cut",
    "cut_stop_strings",
    "drop_duplicate_closer",
    "drop_suffix_repeat",
    "existing_line_cut",
    "finish",
    "only_repeats",
    "indent_width",
    "keep_first_line",
    "leaves_block",
    "process",
    "repeat_cut",
    "repeat_holdback",
]
