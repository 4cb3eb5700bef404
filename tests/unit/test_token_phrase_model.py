"""The phrase model spelled in tokens (local_copilot.devtools.token_phrase_model)."""

from __future__ import annotations

import pytest

from local_copilot.devtools import tiny_model as tm
from local_copilot.devtools.token_phrase_model import token_vocab


def test_pieces_the_tiny_vocabulary_lacks_are_added_after_it() -> None:
    base = tm.vocab()
    toks, ids = token_vocab(["a", "\n", "    ", "\n    ", "print(a, b)"])
    assert toks[:len(base)] == base  # the tiny model's ids stay
    assert ids[:3] == [base.index("a"), base.index("Ċ"), base.index("ĠĠĠĠ")]
    assert [toks[i] for i in ids[3:]] == ["ĊĠĠĠĠ", "print(a,Ġb)"] and min(ids[3:]) >= len(base)


def test_a_repeated_piece_is_refused() -> None:
    # a bigram model gives each token one successor: a piece twice would loop
    with pytest.raises(ValueError, match="differ"):
        token_vocab(["a", "\n", "b", "\n"])
