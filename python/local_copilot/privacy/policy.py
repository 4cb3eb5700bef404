"""The privacy policy: which buffers' text may go to a model server, in one place.

Every path that sends text asks this module: the typed window and alternatives
(Engine.submit / Engine.alternatives), the speculative request (Engine._speculate), cross-file
chunks and yanks (ContextRing.add), and `local-copilot complete` (it goes through
Engine.submit). Lua is given the path rules compiled to Lua patterns once per configuration
(`lua_rules`), so it stops reading a secret buffer before its text leaves Neovim; the host
decides anyway, and tells Lua why a buffer is off (`status()`, `:LocalCopilot status`,
`:checkhealth`).

Rules, in the order they are asked (the first that matches is the reason):

1. path rules, case-insensitive, on the whole path (`\\` counts as `/`): secret directories
   (SECRET_DIRS), secret files below a directory (SECRET_PATHS), credential files of common
   tools and key, certificate and keystore extensions (SECRET_NAMES);
2. the user's `exclude` globs (gitignore-style: a glob without `/` matches a name at any
   depth, `**` crosses directories, a leading `/` or `~/` anchors it to the filesystem);
3. the project ignore files (gitignore syntax, in the file's directory or any directory above
   it; negation with `!`): the plugin's own (IGNORE_FILE, `privacy.ignore_file`) and the ones
   other AI tools read (AI_IGNORE_FILES: JetBrains' `.aiignore`, Gemini's `.aiexclude`,
   Cursor's `.cursorignore`), so a project that says "never send these" to one tool is obeyed
   by this one too;
4. optionally (`privacy.git_ignored`), the files git ignores;
5. content rules on the text that would be sent: a private-key block or a high-confidence
   credential (CONTENT_RULES). Each line is judged once, when it is new (a cache keyed by
   the line's text): a keystroke costs the scan of the one line it changed.

Rules 1-4 judge the path as named and, where it differs, the path it resolves to (its links
followed: `notes.py -> ~/.ssh/config` is the secret file under an ordinary name). A path is
judged once, and again when the editor says the file was written, read or renamed
(`forget_path`). A binary file (`binary_reason`: git's rule) is no text to send either; Lua
applies it to the buffer's file, whose encoding only it knows, and the CLI to the file it reads.
"""

from __future__ import annotations

import codecs
import os
import re
import subprocess
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from ..updates import Editor, PrivacyRules, PrivacyVerdict

__all__ = [
    "BINARY_HEAD",
    "CONTENT_RULES",
    "IGNORE_FILE",
    "SECRET_DIRS",
    "SECRET_NAMES",
    "SECRET_PATHS",
    "Gate",
    "Policy",
    "binary_reason",
    "glob_lua",
    "glob_regex",
]

IGNORE_FILE = ".local-copilot-ignore"
# what other AI tools' users already write in their projects; always read (they only narrow)
AI_IGNORE_FILES = (".aiignore", ".aiexclude", ".cursorignore")

# Anything below these directories is key material, tokens or cloud credentials.
SECRET_DIRS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".password-store", ".vault", ".secrets")
# Files (or directories) that hold credentials where their directory alone does not say so.
SECRET_PATHS = (
    ".docker/config.json", ".config/gcloud/**", ".config/gh/hosts.yml", ".config/hub",
    ".terraform.d/credentials.tfrc.json", ".config/rclone/rclone.conf", ".local/share/keyrings/**",
)
# Matched against the file name.
SECRET_NAMES = (
    # environment and secret files
    ".env", ".env.*", "*.env", ".envrc", ".flaskenv", "secrets.*", "secret.*", "*.secret", "*.secrets",
    "credentials", "credentials.*", "*credentials.json",
    # credential files of common tools
    ".git-credentials", ".gitcookies", ".npmrc", ".yarnrc.yml", ".pypirc", ".pgpass", ".netrc", "_netrc",
    ".my.cnf", ".htpasswd", ".vault-token", ".boto", ".s3cfg", ".dockercfg", "terraform.tfvars", "*.auto.tfvars",
    "service-account*.json", "wp-config.php",
    # SSH and deploy keys
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*deploy_key*", "*deploy-key*", "known_hosts", "authorized_keys",
    # keys, certificates and keystores
    "*.pem", "*.key", "*.p12", "*.pfx", "*.p8", "*.crt", "*.cer", "*.der", "*.csr", "*.p7b", "*.p7c",
    "*.jks", "*.keystore", "*.bks", "*.ppk", "*.gpg", "*.pgp", "*.asc", "*.kdbx", "*.ovpn", "*.mobileprovision",
)

# A URL's password that stands for one, as documentation and templates write it: a template
# (`${DB_PASS}`, `$PASS`, `{password}`, `{{ pw }}`, `<password>`, `%s`, `%(pw)s`), a mask (`xxxx`,
# `****`, `....`) or the word itself (`password`, `your_password`, `changeme`, `secret`,
# `token`), so completion stays on around such examples. Anything else is taken for a real one,
# `user:pass@` and the `postgres:postgres` of a local database included: the rule refuses what
# may be a working credential, not only a strong one.
_URL_PLACEHOLDER = (r"[$<{]|%[s({]|(?:\*+|x+|X+|\.+|#+|•+)@"
                    r"|(?i:(?:your|my|db|the|some)[_\-]?)?"
                    r"(?i:password|passwd|secret|changeme|token|redacted|placeholder|example)@")

# (reason, regex) on one line of text; each is specific enough that a hit is a credential, not code.
CONTENT_RULES: tuple[tuple[str, str], ...] = (
    ("a private-key block", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ("an AWS access key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ("a GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("a Slack token", r"\bxox[abposr]-[0-9A-Za-z]+-[0-9A-Za-z-]{8,}"),
    ("an OpenAI key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{8,}T3BlbkFJ[A-Za-z0-9_\-]{8,}"),
    ("an Anthropic key", r"\bsk-ant-[a-z]+\d\d-[A-Za-z0-9_\-]{40,}"),
    ("a Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("a Stripe secret key", r"\b[sr]k_live_[0-9A-Za-z]{20,}"),
    # header and payload are base64url JSON objects (`{"` is `eyJ`), then a signature
    ("a JSON Web Token", r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{16,}"),
    ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{34,}\b"),
    # the docs' masked example (.../XXXXXXXXXXXXXXXXXXXXXXXX) is not one
    ("a Slack webhook URL", r"\bhooks\.slack\.com/(?:services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/(?!X+\b)[A-Za-z0-9]{16,}"
                            r"|(?:workflows|triggers)/T[A-Z0-9]{6,}/[A-Za-z0-9/]{16,})"),
    # scheme://user:password@host, any scheme (postgres, mysql, mongodb+srv, redis, amqp, https, ...),
    # unless the password is a placeholder (see _URL_PLACEHOLDER)
    ("a URL with a password", r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/?#@'\"`<>]*:"
                              r"(?!" + _URL_PLACEHOLDER + r")[^\s/?#@'\"`]+@[^\s/?#@'\"`:]"),
)
_CONTENT = [(reason, re.compile(rx)) for reason, rx in CONTENT_RULES]
# A cheap first look: most lines hold none of these, and are done after one search.
_CONTENT_ANY = re.compile("|".join(f"(?:{rx})" for _, rx in CONTENT_RULES))

# Lines judged: the windows of ~8 buffers (~260 lines each). Each keystroke adds its cursor
# line, so a larger cache fills with lines typed past (~170 bytes each); a soak's hit rate is
# 0.992 at 2,048 and 0.994 unbounded.
_LINE_CACHE = 2048
_PATH_CACHE = 1024


# -- globs -----------------------------------------------------------------------------------

def _glob_parts(glob: str) -> tuple[list[tuple[str, str]], bool, bool]:
    """Tokens of a gitignore-style glob (('lit', c) | ('star',) | ('dstar',) | ('any',) |
    ('class', body)), whether it is anchored (has a `/` before its end) and whether it names
    a directory only (ends with `/`)."""
    dir_only = glob.endswith("/")
    glob = glob.rstrip("/")
    anchored = "/" in glob
    glob = glob.lstrip("/")
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**", i):
            tokens.append(("dstar", ""))
            i += 2
            if i < len(glob) and glob[i] == "/":
                tokens.append(("dstar/", ""))
                tokens.pop(-2)
                i += 1
        elif c == "*":
            tokens.append(("star", ""))
            i += 1
        elif c == "?":
            tokens.append(("any", ""))
            i += 1
        elif c == "[" and "]" in glob[i + 2:]:
            end = glob.index("]", i + 2)
            tokens.append(("class", glob[i + 1:end]))
            i = end + 1
        elif c == "\\" and i + 1 < len(glob):
            tokens.append(("lit", glob[i + 1]))
            i += 2
        else:
            tokens.append(("lit", c))
            i += 1
    return tokens, anchored, dir_only


def glob_regex(glob: str, root: str = "", *, anywhere: bool | None = None) -> str:
    """A Python regex for `glob` on a lower-cased `/`-separated absolute path. As in gitignore,
    a glob without a `/` (but a trailing one) matches at any depth below `root`, one with a
    `/` matches the path below `root`; `anywhere` says which instead. It matches the named
    file and everything below it (a directory's files)."""
    tokens, anchored, _ = _glob_parts(glob.lower())
    if anywhere is not None:
        anchored = not anywhere
    out = _translate(tokens, _REGEX)
    base = re.escape(root.lower().rstrip("/")) + "/"
    lead = base if anchored else base + "(?:.*/)?"
    return "^" + lead + "".join(out) + "(?:/.*)?$"


_LUA_MAGIC = set("^$()%.[]*+-?")

# each glob token in a dialect: Python's re, and Lua patterns ("dstar/" first: what a leading
# `**/` becomes; "escape": how a character class escapes its escape character)
_REGEX: dict[str, Any] = {"lit": re.escape, "star": "[^/]*", "any": "[^/]", "dstar": ".*", "dstar/": "(?:.*/)?",
                          "dstar/ first": "(?:.*/)?", "escape": ("\\", "\\\\")}
_LUA: dict[str, Any] = {"lit": lambda c: "%" + c if c in _LUA_MAGIC else c, "star": "[^/]*", "any": "[^/]",
                        "dstar": ".*", "dstar/": ".*/", "dstar/ first": "", "escape": ("%", "%%")}


def _translate(tokens: list[tuple[str, str]], dialect: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for kind, body in tokens:
        if kind == "lit":
            out.append(dialect["lit"](body))
        elif kind == "class":
            neg = body.startswith(("!", "^"))
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + body.replace(*dialect["escape"]) + "]")
        elif kind == "dstar/" and not out:
            out.append(dialect["dstar/ first"])
        else:
            out.append(dialect[kind])
    return out


def glob_lua(glob: str, *, anywhere: bool = True) -> str:
    """glob_regex(glob, anywhere=anywhere) as a Lua pattern for `string.find` on `/` .. the
    lower-cased path, to be followed by `$` (the file) or `/` (anything below it). Lua
    patterns have no optional groups: a `**/` is dropped where it leads and matches one or
    more directories elsewhere (the host, which decides, also matches none)."""
    out = _translate(_glob_parts(glob.lower())[0], _LUA)
    return ("^/" if not anywhere else "/") + "".join(out)


# -- the project ignore file ------------------------------------------------------------------

class _IgnoreFile:
    """One ignore file in gitignore syntax: the last matching rule decides (`!` re-includes)."""

    def __init__(self, path: str) -> None:
        self.path = path
        root = os.path.dirname(path)
        self.rules: list[tuple[bool, bool, re.Pattern[str]]] = []
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(256 * 1024)
        except OSError:
            return
        for raw in text.splitlines():
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            neg = line.startswith("!")
            line = line[1:] if neg else line
            line = line.removeprefix("\\")
            _, _, dir_only = _glob_parts(line)
            self.rules.append((neg, dir_only, re.compile(glob_regex(line, _norm(root)))))

    def ignores(self, path: str) -> bool:
        hit = False
        for neg, dir_only, rx in self.rules:
            m = rx.match(path)
            if m is None:
                continue
            # a directory-only rule matches files below it, not a file of that name
            if dir_only and not _below_match(rx, path):
                continue
            hit = not neg
        return hit


def _below_match(rx: re.Pattern[str], path: str) -> bool:
    """Whether `rx` matches `path` through one of its parent directories."""
    parent = path.rsplit("/", 1)[0]
    while parent:
        if rx.match(parent):
            return True
        parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
    return False


def _norm(path: str) -> str:
    return path.replace("\\", "/").lower()


# -- the policy --------------------------------------------------------------------------------

class Policy:
    """What may be sent. Built from the options (`exclude`, `privacy`); cheap to ask often."""

    def __init__(self, exclude: Sequence[str] = (), *, ignore_file: str = IGNORE_FILE,
                 git_ignored: bool = False) -> None:
        self.exclude = tuple(exclude)
        self.ignore_file = ignore_file
        self.git_ignored = git_ignored
        rules: list[tuple[str, str]] = []
        rules += [(f"a secret directory ({d}/)", f"{d}/") for d in SECRET_DIRS]
        rules += [(f"a secret file ({p.removesuffix('/**')})", p) for p in SECRET_PATHS]
        rules += [(f"a secret file ({n})", n) for n in SECRET_NAMES]
        # built-in rules and `exclude` globs match at any depth; an `exclude` glob starting
        # with `/` or `~/` names one place
        self._rules: list[tuple[str, str, bool]] = [(reason, glob, True) for reason, glob in rules]
        for g in self.exclude:
            absolute = g.startswith(("/", "~"))
            self._rules.append((f"excluded by your `exclude` glob {g!r}",
                                os.path.expanduser(g) if absolute else g, not absolute))
        self._compiled = [(reason, re.compile(glob_regex(glob.rstrip("/"), anywhere=anywhere)))
                          for reason, glob, anywhere in self._rules]
        self._paths: OrderedDict[str, str | None] = OrderedDict()
        self._lines: OrderedDict[str, str | None] = OrderedDict()
        # lines known to hold no credential: per keystroke the window differs from the last in a
        # line or two, so a set difference (in C) leaves only those for the ordered walk below
        self._clean: set[str] = set()
        self._ignore_files: dict[str, tuple[_IgnoreFile, ...]] = {}  # directory -> the ignore files in it

    @classmethod
    def from_config(cls, cfg: Any) -> Policy:
        privacy = getattr(cfg, "privacy", None)
        return cls(getattr(cfg, "exclude", ()),
                   ignore_file=getattr(privacy, "ignore_file", IGNORE_FILE) if privacy else IGNORE_FILE,
                   git_ignored=bool(getattr(privacy, "git_ignored", False)) if privacy else False)

    # -- paths --

    def path_reason(self, path: str) -> str | None:
        """Why the file at `path` must not be sent, or None. An empty path (a new buffer) passes."""
        if not path:
            return None
        got = self._paths.get(path, "")
        if got != "":
            self._paths.move_to_end(path)
            return got
        reason = self._judge_path(path)
        self._paths[path] = reason
        if len(self._paths) > _PATH_CACHE:
            self._paths.popitem(last=False)
        return reason

    def _judge_path(self, path: str) -> str | None:
        """The file's name, then where it resolves (a link, or a linked directory above it):
        `notes.py -> ~/.ssh/config` holds the secret file's text under an ordinary name."""
        reason = self._judge_name(path)
        if reason is not None:
            return reason
        real = _resolved(path)
        if real != path:
            reason = self._judge_name(real)
            if reason is not None:
                return f"resolves to {real}: {reason}"
        return None

    def _judge_name(self, path: str) -> str | None:
        norm = _norm(path)
        if not norm.startswith("/"):
            norm = "/" + norm
        for reason, rx in self._compiled:
            if rx.match(norm):
                return reason
        hit = self._ignored_by_file(path)
        if hit:
            return f"listed in {hit}"
        if self.git_ignored and _git_ignores(path):
            return "ignored by git (privacy.git_ignored)"
        return None

    def _ignore_names(self) -> tuple[str, ...]:
        return (self.ignore_file, *AI_IGNORE_FILES) if self.ignore_file else AI_IGNORE_FILES

    def _ignored_by_file(self, path: str) -> str | None:
        if not os.path.isabs(path):
            return None
        norm = _norm(path)
        d = os.path.dirname(path)
        while True:
            files = self._ignore_files.get(d)
            if files is None:
                files = self._ignore_files[d] = tuple(
                    _IgnoreFile(c) for c in (os.path.join(d, n) for n in self._ignore_names()) if os.path.isfile(c))
            for f in files:
                if f.ignores(norm):
                    return f.path
            parent = os.path.dirname(d)
            if parent == d:
                return None
            d = parent

    def forget_paths(self) -> None:
        """An ignore file changed: judge paths anew."""
        self._paths.clear()
        self._ignore_files.clear()

    def forget_path(self, path: str) -> None:
        """The file at `path` was written, read or named anew: judge it (where it resolves, or
        the ignore file it is) again. Paths are judged once, not per keystroke, so a link made
        or changed meanwhile is seen here."""
        if os.path.basename(path) in self._ignore_names():
            self.forget_paths()
        else:
            self._paths.pop(path, None)

    # -- text --

    def text_reason(self, lines: Iterable[str]) -> str | None:
        """Why this text must not be sent (a credential in it), or None."""
        if not isinstance(lines, (list, tuple)):
            lines = list(lines)  # walked twice when a line holds a credential
        clean = self._clean
        fresh = set(lines).difference(clean)
        if not fresh:
            return None
        if all(_line_reason(line) is None for line in fresh):
            if len(clean) + len(fresh) > _LINE_CACHE:
                clean.clear()
            clean.update(fresh)
            return None
        cache = self._lines
        for line in lines:
            got = cache.get(line, "")
            if got == "":
                got = _line_reason(line)
                cache[line] = got
                if len(cache) > _LINE_CACHE:
                    cache.popitem(last=False)
            if got is not None:
                return got
        return None

    def refusal(self, path: str, lines: Iterable[str]) -> str | None:
        """Why a request with `lines` of the file at `path` must not be sent, or None."""
        reason = self.path_reason(path)
        if reason is not None:
            return reason
        found = self.text_reason(lines)
        return f"the text holds {found}" if found else None

    # -- for Lua --

    def lua_rules(self) -> list[list[str]]:
        """[Lua pattern, reason] pairs for the path rules Lua can check itself (the built-in
        ones and `exclude`); it matches them on `/` .. the lower-cased path with `/` separators."""
        return [[glob_lua(glob.rstrip("/"), anywhere=anywhere), reason] for reason, glob, anywhere in self._rules]


LUA_RULES_FILE = "lua/local_copilot/privacy_rules.lua"


def lua_source() -> str:
    """LUA_RULES_FILE: the built-in path rules for Lua before the host has started (it gives
    Lua the rules with the user's `exclude` once it has). Written by
    `python -m local_copilot.privacy.policy`; a test keeps it equal to this."""
    out = ["-- GENERATED by `python -m local_copilot.privacy.policy` from python/local_copilot/privacy/policy.py:",
           "-- the built-in path rules as { Lua pattern, reason }. Do not edit; a test keeps it current.",
           "return {"]
    for pattern, reason in Policy(ignore_file="").lua_rules():
        out.append(f"  {{ {_lua_str(pattern)}, {_lua_str(reason)} }},")
    out.append("}")
    return "\n".join(out) + "\n"


def _lua_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Gate:
    """The engine's side of the policy: the path rules told to the editor with each
    configuration (a `PrivacyRules` update, so Lua does not even read a refused buffer), the
    verdict per buffer, told to the editor when it changes (a `PrivacyVerdict` update), and
    the files refused for now, whose chunks and yanks stay out of `ring`."""

    def __init__(self, editor: Editor, ring: Any) -> None:
        self.policy = Policy()
        self._editor = editor
        self._ring = ring
        self._reasons: dict[int, str] = {}  # buf -> why its text is refused (the editor knows)
        self._files: dict[int, str] = {}  # buf -> its path, while refused

    def configure(self, cfg: Any) -> None:
        self.policy = Policy.from_config(cfg)
        self._ring.use_policy(self.policy)
        self._editor.update(PrivacyRules(rules=self.policy.lua_rules()))

    def refuses(self, snap: Any) -> bool:
        """Whether the text `snap` would send is refused."""
        reason = self.policy.refusal(snap.path, snap.lines)
        if self._reasons.get(snap.buf) != reason:
            if reason is None:
                del self._reasons[snap.buf]
                self._files.pop(snap.buf, None)
            else:
                self._reasons[snap.buf] = reason
                self._files[snap.buf] = snap.path
                # e.g. a credential in the text: the file's chunks taken before this was known go too
                self._ring.drop(snap.path)
            kind = "path" if reason is not None and self.policy.path_reason(snap.path) else "content"
            self._editor.update(PrivacyVerdict(buf=snap.buf, path=snap.path, reason=reason, kind=kind))
        return reason is not None

    def refuses_file(self, filename: str) -> bool:
        """A buffer of this file is refused now: no chunk or yank of it enters the ring."""
        return filename in self._files.values()

    def forget(self, buf: int) -> None:
        self._reasons.pop(buf, None)
        self._files.pop(buf, None)

    def forget_path(self, path: str) -> None:
        """The editor wrote, read or renamed the file at `path`: judge it anew; chunks of it
        leave the ring if it is refused now (e.g. it became a link to a secret file)."""
        self.policy.forget_path(path)
        if path and self.policy.path_reason(path) is not None:
            self._ring.drop(path)


BINARY_HEAD = 8000  # bytes of a file git reads to tell binary from text (buffer.c, FIRST_FEW_BYTES)
# encodings whose text holds NUL bytes: for these only the decoding tells text from binary
_WIDE = re.compile(r"(?:utf-?16|utf-?32|ucs-?2|ucs-?4)", re.IGNORECASE)


def binary_reason(head: bytes, encoding: str = "utf-8", *, more: bool = False) -> str | None:
    """Why a file whose first bytes are `head` (the first BINARY_HEAD, `more` when the file goes
    on) is binary, or None, by git's rule: a NUL byte among them, or text that is not valid in
    the file's `encoding` (a sequence cut at the end of `head` is not held against it)."""
    head = head[:BINARY_HEAD]
    if not _WIDE.match(encoding) and b"\0" in head:
        return f"a binary file (a NUL byte in its first {BINARY_HEAD} bytes)"
    try:
        codecs.getincrementaldecoder(encoding)().decode(head, final=not more)
    except LookupError:
        return None  # an encoding Python does not know: the editor read it, leave it be
    except UnicodeDecodeError:
        return f"a binary file (not valid {encoding})"
    return None


def _resolved(path: str) -> str:
    """The absolute `path` with its links resolved (a missing file below a linked directory,
    or a link to a missing file, too); a relative one as it is (its directory is the editor's)."""
    if not os.path.isabs(path):
        return path
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def _line_reason(line: str) -> str | None:
    if len(line) < 16 or not _CONTENT_ANY.search(line):
        return None
    for reason, rx in _CONTENT:
        if rx.search(line):
            return reason
    return None


def _git_ignores(path: str) -> bool:
    """`git check-ignore` for the file (False outside a repository or without git)."""
    d = os.path.dirname(path) or "."
    while not os.path.isdir(d) and os.path.dirname(d) != d:  # a new file in a new directory
        d = os.path.dirname(d)
    try:
        done = subprocess.run(["git", "-C", d, "check-ignore", "-q", "--", path],
                              capture_output=True, timeout=2, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, LUA_RULES_FILE), "w", encoding="utf-8") as f:
        f.write(lua_source())
