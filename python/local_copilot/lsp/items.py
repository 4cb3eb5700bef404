"""The items a client is given for suggestions: completion items and inline completion items.

A completion item inserts the whole suggestion at the cursor through its `textEdit`; its label
is the suggestion's first line and its documentation the whole suggestion as a code block.
Neovim's `vim.lsp.completion` inserts only the first word of a plain-text edit, and the whole
of a snippet: where the client takes snippets the text goes as one, escaped so nothing in it
is read as a tabstop. A snippet's later lines get the cursor line's indentation from the client
(Neovim's `vim.snippet`, VS Code, Helix), as does any item of a client that says it adjusts
indentation (`insertTextMode` adjustIndentation): for these the later lines are given relative
to the cursor line's indentation, so a body written at that indentation lands there. Any other
client inserts the text as it is (`asIs`), and is given it as the model wrote it. The list is
incomplete (`isIncomplete`), so a typed character asks again instead of filtering a stale
suggestion against the new text.

An inline completion item (LSP 3.18) is the suggestion as the model wrote it, inserted at the
cursor: clients show it as ghost text and insert it as it is.
"""

from __future__ import annotations

from lsprotocol import types

from ..indentation import IndentStyle, columns, fill

__all__ = ["TRIGGER_CHARACTERS", "completion_list", "inline_list", "label", "relative_indent", "snippet_text"]

DETAIL = "local-copilot"

# The characters after which a client opens the menu by itself (Neovim's vim.lsp.completion
# with `autotrigger` opens it on these only; blink.cmp and nvim-cmp on these as well as on
# keyword characters). Where a word or an expression ends and code goes on: a space, a member
# access, an opened call or index, a `:` (a block, a type, a key) and a decorator's `@`, the
# set minuet-ai's language server declares, so a user of the peer finds it where they expect.
# Not inside a word: there a suggestion is the ghost text's, and the menu holds the identifier
# completions of the other servers. Lua's copy is in lua/local_copilot/lsp.lua.
TRIGGER_CHARACTERS = ["@", ".", "(", "[", ":", " "]


def label(text: str) -> str:
    """The suggestion's first line, or where it starts with a line end, its first line with
    text (a label is never empty)."""
    first = text.split("\n", 1)[0]
    if first.strip():
        return first
    rest = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
    return f"\u21b5 {rest}" if rest else "\u21b5"


def relative_indent(text: str, base: str, tabstop: int = 8) -> str:
    """`text` with `base` (the cursor line's indentation) taken off each later line indented
    as far or further: the client puts it back. Widths are compared, tabs at `tabstop` (a line
    of `\t\t` under a base of four spaces keeps the columns past the base, not its own
    whitespace); what remains past the base is written in the line's own style (tabs where the
    line has them)."""
    if not base or "\n" not in text:
        return text
    ts = tabstop if tabstop > 0 else 8
    b = columns(base, 0, ts)
    first, *later = text.split("\n")
    out = [first]
    for ln in later:
        body = ln.lstrip(" \t")
        lead = ln[:len(ln) - len(body)]
        if ln.startswith(base):
            out.append(ln[len(base):])
            continue
        w = columns(lead, 0, ts)
        out.append(ln if w < b else fill(b, w, IndentStyle("\t" not in lead, ts, ts)) + body)
    return "\n".join(out)


def snippet_text(text: str) -> str:
    """`text` as a snippet that inserts exactly it."""
    return text.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")


def _fence(text: str, language: str) -> str:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def completion_list(texts: list[str], position: types.Position, *, indent: str, language: str,
                    snippets: bool, adjusts: bool, tabstop: int = 8) -> types.CompletionList:
    """One item per suggestion in `texts` (the first preselected), each inserting its text at
    `position`, whose line starts with `indent`: as a snippet where the client takes them,
    relative to `indent` where the client adds it to later lines (`adjusts`, or a snippet;
    widths compared with tabs at `tabstop`)."""
    at = types.Range(start=position, end=position)
    adjusted = snippets or adjusts
    mode = types.InsertTextMode.AdjustIndentation if adjusted else types.InsertTextMode.AsIs
    items = []
    for i, text in enumerate(texts):
        insert = relative_indent(text, indent, tabstop) if adjusted else text
        items.append(types.CompletionItem(
            label=label(text),
            kind=types.CompletionItemKind.Text,
            detail=DETAIL,
            documentation=types.MarkupContent(kind=types.MarkupKind.Markdown, value=_fence(text, language)),
            sort_text=f"{i:02d}",
            preselect=i == 0,
            text_edit=types.TextEdit(range=at, new_text=snippet_text(insert) if snippets else insert),
            insert_text_format=types.InsertTextFormat.Snippet if snippets else types.InsertTextFormat.PlainText,
            insert_text_mode=mode,
        ))
    return types.CompletionList(is_incomplete=True, items=items)


def inline_list(texts: list[str], position: types.Position) -> types.InlineCompletionList:
    at = types.Range(start=position, end=position)
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=t, range=at) for t in texts])
