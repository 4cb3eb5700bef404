"""Draw the README's pictures from a real Neovim: the screen of a headless Neovim running the
plugin against a real llama-server, cell by cell with its colours, written as SVG.

    .venv/bin/python scripts/screenshot.py            # doc/ghost-text.svg, doc/menu.svg
    .venv/bin/python scripts/screenshot.py --out DIR

The server runs a generated model that writes one known answer (devtools/token_phrase_model.py:
the tests' deterministic model, as no model hub is reached here), so the picture shows what
the plugin draws, not what a real model would suggest. Everything else is as a user has it:
the plugin registered by :UpdateRemotePlugins, its Python host, Neovim's default colour
scheme, the keys typed one by one in Insert mode.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import pynvim  # noqa: E402

from local_copilot.devtools.nvim_bin import nvim_binary  # noqa: E402
from local_copilot.devtools.rplugin import register_rplugin  # noqa: E402
from local_copilot.devtools.token_phrase_model import write_token_phrase_gguf  # noqa: E402
from local_copilot.server_options import ServerOptions  # noqa: E402
from local_copilot.servers.llama_cpp import LlamaServer  # noqa: E402
from local_copilot.servers.programs import find_llama_server  # noqa: E402

COLUMNS, LINES = 72, 14
# the file shown and where the cursor types; the model's answer after the typed text
FILE = ['"""Small number helpers."""', "", "", "def fibonacci(n):"]
TYPED = "\n"  # Enter after the header (no autoindent: the prompt ends where the model's answer starts)
ANSWER = ["    a, b = 0, 1", "\n    ", "for _ in range(n):", "\n        ", "a, b = b, a + b", "\n    return a"]

CELL_W, CELL_H, FONT = 8.4, 18, 13.5


def wait(pred: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise SystemExit(f"screenshot: timed out waiting for {what}")


def cells(nvim: pynvim.Nvim) -> list[list[tuple[str, dict[str, Any]]]]:
    """The screen: each cell's text and highlight attributes, read back from Neovim's own grid
    (nvim__inspect_cell, the API Neovim's screen tests use); the last row, the command line,
    is the message grid's, read as text ('-- INSERT --' in the mode message's bold)."""
    nvim.command("redraw")
    grid = [[tuple(nvim.request("nvim__inspect_cell", 1, r, c)[:2]) for c in range(COLUMNS)]  # type: ignore[misc]
            for r in range(LINES - 1)]
    last = "".join(nvim.funcs.screenstring(LINES, c + 1) for c in range(COLUMNS))
    grid.append([(ch, {"bold": True} if last.strip() else {}) for ch in last])
    return grid  # type: ignore[return-value]


def colour(value: int | None, default: str) -> str:
    return default if value is None else f"#{value:06x}"


def svg(grid: list[list[tuple[str, dict[str, Any]]]], fg: str, bg: str, title: str, cursor: tuple[int, int]) -> str:
    w, h = COLUMNS * CELL_W, LINES * CELL_H
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" '
           f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="{FONT}">',
           f"<title>{html.escape(title)}</title>", f'<rect width="100%" height="100%" fill="{bg}"/>']
    for r, row in enumerate(grid):
        c = 0
        while c < COLUMNS:  # one run of cells with the same attributes at a time
            attrs = row[c][1]
            end = c
            while end < COLUMNS and row[end][1] == attrs:
                end += 1
            text = "".join(t or " " for t, _ in row[c:end])
            reverse = attrs.get("reverse")
            cell_fg = colour(attrs.get("foreground"), fg)
            cell_bg = colour(attrs.get("background"), bg)
            if reverse:
                cell_fg, cell_bg = cell_bg, cell_fg
            x, y = c * CELL_W, r * CELL_H
            if cell_bg != bg:
                out.append(f'<rect x="{x:.1f}" y="{y}" width="{(end - c) * CELL_W:.1f}" height="{CELL_H}" fill="{cell_bg}"/>')
            if text.strip():
                style = (' font-style="italic"' if attrs.get("italic") else "") + (
                    ' font-weight="bold"' if attrs.get("bold") else "")
                out.append(f'<text x="{x:.1f}" y="{y + CELL_H - 5}" fill="{cell_fg}"{style} xml:space="preserve" '
                           f'textLength="{len(text) * CELL_W:.1f}" lengthAdjust="spacingAndGlyphs">'
                           f"{html.escape(text)}</text>")
            c = end
    row, col = cursor  # Insert mode's bar cursor, before the cell it is at
    out.append(f'<rect x="{col * CELL_W:.1f}" y="{row * CELL_H + 1}" width="2" height="{CELL_H - 2}" fill="{fg}"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _valid_grid(nvim: pynvim.Nvim, handle: int) -> bool:
    try:
        nvim.request("nvim__inspect_cell", handle, 0, 0)
        return True
    except pynvim.NvimError:
        return False


def menu(nvim: pynvim.Nvim, fg: str, bg: str) -> str:
    """The same place with Neovim's own completion menu open on the suggestion: the plugin's
    language server inside Neovim (`lsp = true`) answers vim.lsp.completion, as a user's
    <C-x><C-o> asks it (the ghost text hides under the menu)."""
    nvim.input("<Esc>")
    wait(lambda: nvim.api.get_mode()["mode"] == "n", "Normal mode")
    cid = wait(lambda: nvim.exec_lua("return require('local_copilot.lsp').client_id()"), "the language server")
    nvim.command("set completeopt=menuone,noselect pumheight=6")
    nvim.exec_lua("vim.lsp.completion.enable(true, ..., 0, { autotrigger = false })", cid)
    nvim.input("A")
    wait(lambda: nvim.api.get_mode()["mode"] == "i", "Insert mode")
    nvim.exec_lua("vim.lsp.completion.get()")
    wait(lambda: nvim.funcs.pumvisible(), "the completion menu", timeout=60)
    nvim.input("<C-n>")  # the first item selected, its text previewed in the line
    wait(lambda: nvim.funcs.complete_info(["selected"])["selected"] == 0, "the first item selected")
    grid = cells(nvim)
    # the menu has a grid of its own over the window's (the only grid besides the screen's
    # without ext_multigrid): its cells go where pum_getpos() says it is drawn
    pos = nvim.funcs.pum_getpos()
    handle = next(h for h in range(2, 64) if _valid_grid(nvim, h))
    top, left = int(pos["row"]), int(pos["col"])
    for r in range(int(pos["height"])):
        for c in range(int(pos["width"]) + int(pos["scrollbar"])):
            if top + r < LINES - 1 and left + c < COLUMNS:
                grid[top + r][left + c] = tuple(nvim.request("nvim__inspect_cell", handle, r, c)[:2])  # type: ignore[call-overload]
    cursor = nvim.exec_lua("local top, left = unpack(vim.fn.win_screenpos(0))\n"
                           "return { top + vim.fn.winline() - 2, left + vim.fn.wincol() - 2 }")
    return svg(grid, fg, bg, "local-copilot.nvim: the suggestion in the completion menu", tuple(cursor))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "doc", help="folder for the SVG files")
    args = ap.parse_args(argv)
    nvim_bin, llama_bin = nvim_binary(), find_llama_server()
    if not nvim_bin or not llama_bin:
        raise SystemExit("screenshot: needs nvim and llama-server: run `make venv` first")
    with tempfile.TemporaryDirectory(prefix="lc-shot-") as tmp:
        root = Path(tmp)
        model = write_token_phrase_gguf(root / "answer.gguf", ANSWER)
        manifest = register_rplugin(nvim_bin, root / "rplugin.vim")
        options = ServerOptions(parallel=1, context_tokens=1024, extra_args=["-t", "1"])
        with LlamaServer.for_model(model, binary=llama_bin, log_file=root / "server.log", options=options) as server:
            env = dict(os.environ, NVIM_RPLUGIN_MANIFEST=str(manifest), XDG_STATE_HOME=str(root / "state"),
                       XDG_DATA_HOME=str(root / "data"), XDG_CONFIG_HOME=str(root / "config"),
                       LOCAL_COPILOT_LOG_DIR=str(root / "log"), LOCAL_COPILOT_RUNTIME_DIR=str(root / "run"))
            old = dict(os.environ)
            os.environ.update(env)
            try:
                nvim = pynvim.attach("child", argv=[nvim_bin, "--clean", "--embed", "--headless", "-n",
                                                    "--cmd", f"set rtp^={REPO}",
                                                    "--cmd", f"let g:local_copilot_python = '{sys.executable}'"])
            finally:
                os.environ.clear()
                os.environ.update(old)
            try:
                nvim.command(f"let g:loaded_remote_plugins = '{manifest}'")
                nvim.command(f"source {manifest}")
                nvim.ui_attach(COLUMNS, LINES, rgb=True, ext_linegrid=True)
                nvim.command("set termguicolors number noswapfile shiftwidth=4 expandtab laststatus=2")
                nvim.exec_lua("require('local_copilot').setup(...)", {
                    "backends": {"llama.cpp": {"url": server.url}}, "keymaps": {"accept": "<Tab>"},
                    "speculative": False, "n_predict_first": 0, "lsp": True})
                (root / "fib.py").write_text("\n".join(FILE) + "\n")
                nvim.command(f"cd {root} | edit fib.py")
                nvim.command("syntax on | set filetype=python | setlocal noautoindent nosmartindent indentexpr=")
                nvim.command(f"call cursor({len(FILE)}, 1)")
                nvim.input("A")
                for key in TYPED.replace("\n", "<CR>").split():
                    nvim.input(key)
                wait(lambda: nvim.exec_lua("return require('local_copilot').is_visible()"), "the ghost text")
                # the suggestion as it stays: no further chunk changes it for a while
                last: list[str] = []
                wait(lambda: last.append(nvim.exec_lua("return require('local_copilot.ghost').text()")) or
                     (len(last) > 10 and len(set(last[-10:])) == 1), "the suggestion to settle")
                normal = nvim.api.get_hl(0, {"name": "Normal"})
                fg, bg = colour(normal.get("fg"), "#e0e2ea"), colour(normal.get("bg"), "#14161b")
                args.out.mkdir(parents=True, exist_ok=True)
                target = args.out / "ghost-text.svg"
                grid = cells(nvim)
                cursor = nvim.exec_lua("local top, left = unpack(vim.fn.win_screenpos(0))\n"
                                       "return { top + vim.fn.winline() - 2, left + vim.fn.wincol() - 2 }")
                target.write_text(svg(grid, fg, bg, "local-copilot.nvim: ghost text after the cursor", tuple(cursor)))
                print(f"screenshot: wrote {target}")
                target = args.out / "menu.svg"
                target.write_text(menu(nvim, fg, bg))
                print(f"screenshot: wrote {target}")
            finally:
                nvim.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
