"""Turn a raw (streamed) FIM completion into the ghost text to show at the cursor.

The engine calls :func:`process` (compose.py) on every streamed chunk with the accumulated
raw text; what it holds back while streaming, and why a later call never takes text back,
is said there.

Stages (one module per kind of rule, composed by :func:`process`):

1. :func:`cut_stop_strings` (stop_strings.py) - cut at the first stop string (the served
   model's FIM special tokens), and at another family's special token (foreign_tokens.py).
2. :func:`keep_first_line` (cursor_line.py) - mid-line completions (text after the cursor)
   stay on one line. Other completions get their indentation written the buffer's way
   (``PostContext.indent``, local_copilot/indentation.py: spaces or tabs as 'expandtab' and
   the lines around say, at the width the model meant) before the rules below compare their
   lines with the buffer's.
3. :func:`drop_suffix_repeat` (cursor_line.py) / :func:`existing_line_cut` (next_lines.py) -
   drop the part that repeats the text after the cursor, and stop where the output starts
   repeating the following existing lines.
4. :func:`drop_duplicate_closer` (cursor_line.py) / :func:`closer_cut` (next_lines.py) - a
   closing bracket or quote that already exists (autopairs, or the next line) is not
   inserted twice; a bracket stack keeps closers that belong to brackets the completion
   opened.
5. :func:`block_indent` / :func:`leaves_block` (block.py) - stop when a later line dedents
   out of the block the cursor is in.
6. :func:`repeat_cut` (repeats.py) - stop at a loop (a line 3 times in a row, or a block of
   lines twice), keeping the first occurrence.
7. :func:`finish` (compose.py) - trim trailing blank lines / whitespace, cap at
   ``max_lines``.
8. whitespace-only completions become ``''`` (also in :func:`finish`), and so do
   completions that only repeat the line above (:func:`only_repeats`, repeats.py) or the
   text after the cursor (:func:`drop_suffix_repeat` cuts all of it): nothing to show.
9. a suggestion holding an invisible or format character that the text around the
   cursor does not use is not shown (invisible_chars.py).

The rules read the text through lines.py (whitespace, blank lines, indentation), scanner.py
(the brackets, quotes and comment of one line) and structure.py (the statement, bracket,
string or comment the cursor is in, from the lines around it); context.py holds what
:func:`process` reads and answers.  A module's ``_`` names are the package's own: its
modules share them, callers outside use the names below.

Everything works on Python ``str`` (code points): tabs, CJK and emoji need no
special casing, and no byte offsets are used anywhere.
"""

from __future__ import annotations

from .block import block_indent, leaves_block
from .compose import finish, process
from .context import PostContext, Result
from .cursor_line import drop_duplicate_closer, drop_suffix_repeat, keep_first_line
from .lines import indent_width
from .next_lines import closer_cut, existing_line_cut
from .repeats import only_repeats, repeat_cut, repeat_holdback
from .stop_strings import cut_stop_strings

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
