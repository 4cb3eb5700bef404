"""What a backend's server can do, as its probe found it, in one frozen struct.

A dialect answers each of these from what it probed (its template, its props, its model);
`HttpBackend.capabilities()` asks them once, when the server has been probed, and keeps the
answers as `caps` until the server is lost or forgotten (`forget()`), when the struct is
replaced as a whole by the next probe's. The keystroke path reads `caps`, not the dialect.
"""

from __future__ import annotations

import msgspec

__all__ = ["UNPROBED", "Capabilities"]


class Capabilities(msgspec.Struct, frozen=True, kw_only=True):
    # the server was probed as far as requests need (False: the rest says nothing yet)
    probed: bool = False
    # tokens one request's prompt and answer may take (context_limit()); None: not said
    context: int | None = None
    # the prompt style in use: 'fim', 'continue' or 'chat' (prompt/styles.py)
    style: str = "fim"
    # strings that end a completion (the FIM template's special tokens), cut client-side too
    stop_strings: tuple[str, ...] = ()
    # a request can continue a text: the same prompt plus the text so far asks for what follows
    continues: bool = False
    # the prompt tokens the server reports are of the whole prompt sent (the estimator learns)
    counts_full_prompt: bool = False
    # the server runs each request in a slot of its choosing and says which (llama-server)
    places_in_slots: bool = False
    # one request can return several candidates (FimRequest.n)
    supports_n: bool = False
    # a request can evaluate the prompt and generate nothing (a warm-up)
    warms: bool = False
    # the server counts tokens but says no times: the client's clock times its answers
    clock_timed: bool = False


UNPROBED = Capabilities()
