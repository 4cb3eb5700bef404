"""ghost/words.py: where accept-word and accept-line stop, as byte offsets into the suggestion."""

from __future__ import annotations

from local_copilot.ghost.words import word_stops


def cut(text: str) -> list[str]:
    raw = text.encode()
    out, last = [], 0
    for stop in word_stops(text):
        out.append(raw[last:stop].decode())
        last = stop
    return out


def test_word_stops_split_words_punctuation_and_lines() -> None:
    assert cut("foo(bar, baz)\n    return 1") == ["foo", "(", "bar", ",", " baz", ")", "\n", "    return", " 1"]


def test_word_stops_are_bytes_with_cjk_and_emoji() -> None:
    assert cut("名前 = '🙂' + x") == ["名前", " =", " '🙂'", " +", " x"]
    assert word_stops("名前")[-1] == len("名前".encode())


def test_word_stops_end_at_the_end() -> None:
    assert cut("x  ") == ["x", "  "]
    assert word_stops("") == [0]


def test_each_newline_is_a_stop_of_its_own() -> None:
    # accept-word on an empty line takes that line break only, never the next line's text
    assert cut("a\n\n\tb") == ["a", "\n", "\n", "\tb"]
    assert cut("\n") == ["\n"]


def test_a_run_of_one_punctuation_kind_is_one_word() -> None:
    assert cut("x != y;") == ["x", " !=", " y", ";"]
    assert cut("->>") == ["->>"]


def test_invalid_utf8_from_the_buffer_counts_its_bytes() -> None:
    # pynvim decodes invalid UTF-8 with surrogateescape: each such byte is one byte in the buffer
    # (and, being no word character, a word of its own)
    text = b"a\xff b".decode("utf-8", "surrogateescape")
    assert word_stops(text) == [1, 2, 4]
