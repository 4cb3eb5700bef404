"""The engine's side of the privacy policy: the verdict per buffer, told to the editor."""

from __future__ import annotations

from typing import Any

from ..updates import Editor, PrivacyRules, PrivacyVerdict
from .policy import Policy

__all__ = ["Gate"]


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
