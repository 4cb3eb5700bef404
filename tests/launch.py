"""How the suite launches its llama-servers: by the users' launch recipe (servers/llama_cpp_recipe.py,
through `LlamaServer.for_model`), with the options the tests add to it."""

from __future__ import annotations

from local_copilot.devtools.tiny_model import N_CTX
from local_copilot.server_options import ServerOptions


def suite_options(*extra: str, parallel: int = 1, context_tokens: int = N_CTX) -> ServerOptions:
    """The backends.NAME.server options of a suite server, on top of the users' recipe:

    - one slot (`parallel`), because tests assert on prompt-cache hits, on /slots going idle and
      on the tokens each request evaluates, which a second slot would split between slots; a
      test that needs several slots asks for them;
    - a slot of the tiny models' trained context (`context_tokens`);
    - one thread (-t 1): llama.cpp's threads spin-wait on each other, and on a busy 2-core
      machine two of them stall the tiny model's tokens;
    - `extra`: more llama-server arguments, after the recipe's (the later of two flags wins).
    """
    return ServerOptions(parallel=parallel, context_tokens=context_tokens, extra_args=["-t", "1", *extra])
