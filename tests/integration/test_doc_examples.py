"""Every example in the README and the help runs as written.

Each Lua snippet of README.md, doc/local_copilot.txt and doc/other-editors.md is loaded in a
real headless Neovim with the plugin: statements run as they are, a table's fields (the
fragments the help shows inside setup({...})) become setup()'s options, and a plugin spec
(`return { dir = ..., build = ..., opts = ... }`) has its `opts` given to setup() as lazy.nvim
gives them. Every set of options setup() received must be taken by Lua (no 'bad option') and
by the Python host's validation (`load_config`, which the host runs on the same table). Snippets
for plugins that cannot be installed here (nvim-cmp, blink.cmp) or Neovim 0.12's API are
compiled only, and counted apart.

Each shell command runs as far as it can without starting a server or downloading a model:
`make` with -n, `local-copilot` through its own argument parser, `llama-server` against its
--help (every flag the example gives must be one it has); the README's install without a
plugin manager runs for real, in a home of its own (test_the_readme_install_...).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from local_copilot.cli.main import build_parser
from local_copilot.config import Config, load_config

from ..helpers import wait_for
from ..pki import Pki
from .nvim_session import REPO, start_nvim

pytestmark = pytest.mark.integration

DOCS = {
    "README.md": REPO / "README.md",
    "help": REPO / "doc" / "local_copilot.txt",
    "other-editors": REPO / "doc" / "other-editors.md",
}

# snippets for what cannot run here: compiled, not run (the substring that marks them -> why)
COMPILED_ONLY = {
    "cmp.": "nvim-cmp cannot be installed where the tests run",
    "require('cmp')": "nvim-cmp cannot be installed where the tests run",
    "get_selected_item": "blink.cmp cannot be installed where the tests run",
    "inline_completion": "Neovim 0.12's API; the tests run Neovim 0.11",
}


@dataclass
class Snippet:
    doc: str
    line: int
    lang: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def markdown_snippets(doc: str, text: str) -> list[Snippet]:
    """Fenced blocks (```lua, ```sh), also those indented inside a list item."""
    out = []
    for m in re.finditer(r"^( *)```(\w+)\n(.*?)^\1```", text, re.M | re.S):
        body = "\n".join(ln[len(m.group(1)):] for ln in m.group(3).splitlines())
        out.append(Snippet(doc, text.count("\n", 0, m.start()) + 1, m.group(2), body))
    return out


def help_snippets(doc: str, text: str) -> list[Snippet]:
    """Vim help examples: a line ending in `>lua` (or `>sh`) opens one, indented lines follow,
    a line starting with `<` or in the first column closes it."""
    out = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"(?:^|\s)>(lua|sh)$", line)
        if not m:
            continue
        body = []
        for ln in lines[i + 1:]:
            if ln.startswith("<") or (ln and not ln[0].isspace()):
                break
            body.append(ln)
        indent = min((len(ln) - len(ln.lstrip()) for ln in body if ln.strip()), default=0)
        out.append(Snippet(doc, i + 2, m.group(1), "\n".join(ln[indent:] for ln in body).strip("\n")))
    return out


def snippets(lang: str) -> list[Snippet]:
    found = []
    for doc, path in DOCS.items():
        text = path.read_text()
        found += help_snippets(doc, text) if path.suffix == ".txt" else markdown_snippets(doc, text)
    return [s for s in found if s.lang == lang]


# Runs one snippet in Neovim: statements, else a table's fields (`fragment`: those first), else
# it does not compile. setup() is wrapped to record what it is given and whether Lua took it.
RUN = r"""
local src, name, compile_only, fragment = ...
local lc = require('local_copilot')
local real = lc.setup
local seen = {}
-- what crosses to the test: functions named, a table with keys of both kinds keyed by strings
local function plain(v)
  if type(v) == 'function' then return '<function>' end
  if type(v) ~= 'table' then return v end
  local out = vim.islist(v) and {} or vim.empty_dict()
  for k, x in pairs(v) do out[vim.islist(v) and k or tostring(k)] = plain(x) end
  return out
end
lc.setup = function(o)
  real(o)
  seen[#seen + 1] = { opts = o == nil and vim.empty_dict() or plain(o), status = lc.status() }
end
local before = vim.fn.execute('messages')
local mode, chunk, err = 'statements', nil, nil
if not fragment then chunk, err = loadstring(src, '=' .. name) end
if not chunk then
  mode = 'options'
  chunk, err = loadstring('return {\n' .. src .. '\n}', '=' .. name)
end
local out = { mode = mode, seen = seen }
if not chunk then
  out.error = 'does not compile: ' .. err
elseif compile_only then
  out.mode = 'compiled only'
else
  local ok, value = pcall(chunk)
  if not ok then
    out.error = tostring(value)
  elseif mode == 'statements' and type(value) == 'table' and value.build ~= nil then
    -- a lazy.nvim spec: lazy checks these and calls require(main).setup(opts)
    out.mode = 'plugin spec'
    out.spec = { dir = value.dir, name = value.name, main = value.main, build = type(value.build) }
    local loaded, main = pcall(require, value.main)
    if not loaded then out.error = 'main = ' .. tostring(value.main) .. ': ' .. tostring(main)
    else main.setup(value.opts) end
  elseif mode == 'options' then
    lc.setup(value)
  end
end
lc.setup = real
local after = vim.fn.execute('messages')
out.messages = after:sub(#before + 1)
return out
"""


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with what the examples name there: the team CA's certificate (~/team-ca.pem),
    a folder of models (~/models)."""
    home = tmp_path / "home"
    home.mkdir()
    Pki(home)
    (home / "models").mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


OPTION_NAMES = {f.encode_name for f in msgspec.structs.fields(Config)}


def fragment(snip: Snippet) -> bool:
    """Whether the snippet is some of setup()'s fields (`backends = { ... }`), which Lua would
    also take as an assignment to a global of that name."""
    code = [ln for ln in snip.text.splitlines() if ln.strip() and not ln.lstrip().startswith("--")]
    first = re.match(r"(\w+)\s*=[^=]", code[0]) if code else None
    return first is not None and first.group(1) in OPTION_NAMES


def test_every_lua_snippet_runs_and_its_options_are_taken(nvim_bin: str, manifest: Path, nvim_env: dict[str, str],
                                                          home: Path, tmp_path: Path) -> None:
    found = snippets("lua")
    env = dict(nvim_env, HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    counts: dict[str, int] = {}
    failures = []
    for doc in DOCS:
        nvim = start_nvim(nvim_bin, manifest, env)
        try:
            nvim.command(f"edit {tmp_path / 'example.py'}")
            for snip in (s for s in found if s.doc == doc):
                why = next((w for mark, w in COMPILED_ONLY.items() if mark in snip.text), None)
                res: dict[str, Any] = nvim.exec_lua(RUN, snip.text, snip.name, why is not None, fragment(snip))
                counts[res["mode"]] = counts.get(res["mode"], 0) + 1
                problem = res.get("error") or ("local-copilot" in res["messages"] and res["messages"].strip())
                for call in res["seen"]:
                    if call["status"] == "bad option":
                        problem = f"setup() refused {call['opts']!r}: {res['messages'].strip()}"
                    else:
                        try:
                            load_config(call["opts"])
                        except Exception as exc:  # what the host would say about these options
                            problem = f"the host refuses {call['opts']!r}: {exc}"
                if res["mode"] == "plugin spec":
                    spec = res["spec"]
                    assert spec["build"] == "function" and spec["main"] == "local_copilot", (snip.name, spec)
                    assert spec["name"] == "local-copilot.nvim" and spec["dir"].startswith("~/"), (snip.name, spec)
                if problem:
                    failures.append(f"{snip.name}: {problem}\n{snip.text}")
        finally:
            nvim.close()
    print(f"Lua snippets: {len(found)} ({', '.join(f'{n} {m}' for m, n in sorted(counts.items()))})")
    assert not failures, "\n\n".join(failures)
    assert counts.get("plugin spec") == 2  # the README's and the help's
    assert len(found) >= 25 and counts.get("compiled only", 0) <= 4


def commands(snip: Snippet) -> list[list[str]]:
    """The commands of a shell snippet, continuation lines joined, comments dropped."""
    text = snip.text.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in text.splitlines() if shlex.split(line, comments=True)]


def readme_table_commands() -> list[list[str]]:
    """The install and run commands in the README's "Getting a server" table."""
    readme = DOCS["README.md"].read_text()
    section = readme.split("## Getting a server", 1)[1]
    table = section[section.index("\n|") + 1:].split("\n\n", 1)[0]
    cells = [c for row in table.splitlines()[2:] for c in row.strip("|").split(" | ")[1:]]
    # (a code span of one word is a program named in the prose)
    return [shlex.split(code) for cell in cells for code in re.findall(r"`([^`]+)`", cell) if " " in code]


def llama_server_flags(llama_bin: str) -> str:
    return subprocess.run([llama_bin, "--help"], capture_output=True, text=True, timeout=60, check=False).stdout


def test_every_shell_command_runs_as_far_as_it_can_here(llama_bin: str) -> None:
    cmds = [c for s in snippets("sh") for c in commands(s)] + readme_table_commands()
    ran: dict[str, int] = {}
    not_here = []
    for argv in cmds:
        prog = argv[0]
        if prog == "make":
            done = subprocess.run(["make", "-n", *argv[1:]], cwd=REPO, capture_output=True, text=True, check=False)
            assert done.returncode == 0, (argv, done.stderr)
        elif prog == "local-copilot":
            build_parser().parse_args(argv[1:])  # exits (and fails the test) on a flag it does not take
        elif prog == "llama-server" or argv[:2] == ["llama", "serve"]:
            # llama.cpp's single `llama` binary: `llama serve` is llama-server, the same flags
            flags = llama_server_flags(llama_bin)
            for flag in (a for a in argv[1:] if a.startswith("--")):
                assert re.search(rf"(^|[\s,]){re.escape(flag)}\b", flags), (argv, flag)
        elif Path(prog).name in ("python", "python3") and argv[1:4] == ["-m", "pip", "install"]:
            # only what pip would do, in this test's environment (the plugin's own, as the
            # README's path names it): the package resolves from the index, nothing is built
            done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--only-binary", ":all:",
                                   *argv[4:]], capture_output=True, text=True, timeout=300, check=False)
            if done.returncode != 0 and "from versions: none" in done.stderr:
                not_here.append(f"{shlex.join(argv)} (no wheel in this machine's index: pip would build it)")
                continue
            assert done.returncode == 0, (argv, done.stderr)
        elif prog in ("brew", "winget"):
            assert shutil.which(prog) is None  # where it is installed, this test should run it
            not_here.append(f"{shlex.join(argv)} ({prog} is not on this Linux machine)")
            continue
        elif prog in ("mkdir", "ln", "nvim"):
            ran["install (test_the_readme_install_without_a_plugin_manager_builds_as_written)"] = 0
            continue
        else:
            pytest.fail(f"a shell example this test does not know how to run: {shlex.join(argv)}")
        ran[prog] = ran.get(prog, 0) + 1
    print(f"shell commands: {len(cmds)}; checked: {ran}; not runnable here: {not_here}")
    assert len(cmds) >= 10


def test_the_readme_install_without_a_plugin_manager_builds_as_written(nvim_bin: str, tmp_path: Path) -> None:
    """The README's three lines for Neovim's own packages, run as a user runs them: a clone in
    ~/src, linked into the package folder, `build()` from a headless Neovim. Then the clone
    has its Python environment and Neovim has the remote plugin registered."""
    block = next(s for s in snippets("sh") if s.doc == "README.md" and "pack/local/start" in s.text)
    home = tmp_path / "home"
    clone = home / "src" / "local-copilot.nvim"
    # the working tree as a clone has it (what git tracks and what is new), without the
    # project's own environments and caches
    shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(".venv*", ".cache", ".git", "results", "*.egg-info",
                                                               "__pycache__", ".mypy_cache", ".ruff_cache", "node_modules"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "NVIM", "VIRTUAL_ENV", "PYTHON"))}
    env.update(HOME=str(home), PATH=f"{Path(nvim_bin).parent}{os.pathsep}{env['PATH']}")
    done = subprocess.run(["bash", "-e", "-c", block.text], env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    python = clone / ".venv" / "bin" / "python"
    check = subprocess.run([python, "-c", "import pynvim, httpx, msgspec, platformdirs, pygls, lsprotocol, local_copilot"],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    assert (clone / ".venv" / "bin" / "local-copilot").exists()  # the terminal tools the README names
    manifest = home / ".local" / "share" / "nvim" / "rplugin.vim"
    assert "LocalCopilot" in wait_for(lambda: manifest.exists() and manifest.read_text(), what="the manifest")
