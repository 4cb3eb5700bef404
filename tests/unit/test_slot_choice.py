"""backends/slots.py: which slot a buffer's first request takes, from the slots as llama-server's
`/slots` shows them (a slot that has run a task shows its `id_task`; one running shows
`is_processing`)."""

from __future__ import annotations

import time

from local_copilot.backends.slots import Slots, SlotState


def _fresh(n: int) -> list[SlotState]:
    return [SlotState(i, busy=False) for i in range(n)]


def test_a_new_buffer_takes_a_slot_nobody_has_used_and_keeps_it() -> None:
    slots = Slots()
    states = _fresh(4)
    assert slots.choose(1, states) == 0
    assert slots.of(1) == 0
    # the next buffer another one, though the server still shows slot 0 unused (it has not run
    # buffer 1's request yet)
    assert slots.choose(2, states) == 1
    # a buffer with a slot keeps it
    assert slots.choose(1, _fresh(4)) == 0


def test_a_slot_another_editor_used_or_uses_is_left_to_the_servers_choice() -> None:
    slots = Slots()
    states = [SlotState(0, busy=True, task=4), SlotState(1, busy=False, task=2),
              SlotState(2, busy=True), SlotState(3, busy=False)]
    assert slots.choose(1, states) == 3  # the only idle slot nobody has used
    # every slot used, not all by this editor: the server chooses (None), and its answer is learned
    assert slots.choose(2, states) is None
    assert slots.of(2) is None


def test_once_all_slots_hold_this_editors_buffers_a_new_one_takes_the_least_recently_used() -> None:
    slots = Slots()
    for buf in (1, 2, 3):
        slots.choose(buf, _fresh(3))
    used = [SlotState(i, busy=False, task=i) for i in range(3)]
    slots.learn(1, 0)  # buffer 1 ran a request since: buffer 2 is the least recently used
    assert slots.choose(4, used) == 1
    # buffer 2 no longer holds it: its next request names no slot (the server finds its prompt)
    assert slots.of(2) is None and slots.of(4) == 1
    # a busy slot is not taken: buffer 3's (2) is running, so buffer 1's (0) is the idle one
    busy = [SlotState(0, busy=False, task=0), SlotState(1, busy=False, task=1),
            SlotState(2, busy=True, task=2)]
    slots.learn(4, 1)
    assert slots.choose(5, busy) == 0
    assert slots.of(1) is None


def test_a_slot_the_server_gave_another_buffer_is_no_longer_the_old_ones() -> None:
    slots = Slots()
    slots.learn(1, 2)
    slots.learn(2, 2)  # the server placed buffer 2's first request in buffer 1's slot
    assert slots.of(1) is None and slots.of(2) == 2


def test_a_request_in_another_slot_leaves_the_idle_buffers_to_the_servers_choice() -> None:
    slots = Slots()
    slots.learn(1, 0)
    slots.learn(2, 1)
    # buffer 1's request starts in slot 0, buffer 2's idle: the server may empty slot 1, so
    # buffer 2's next request names no slot (the server loads its prompt back where it chooses)
    slots.sent(0)
    assert slots.of(1) == 0 and slots.of(2) is None and slots.known(2)
    # buffer 2's request starts while buffer 1's still runs: a busy slot is kept
    slots.sent(None)
    assert slots.of(1) == 0
    slots.learn(2, 3)  # (the server said where it ran)
    slots.ended(None)
    assert slots.of(2) == 3
    slots.ended(0)
    # a request where the server chooses (a next edit) may empty any idle slot
    slots.sent(None)
    assert slots.of(1) is None and slots.of(2) is None
    slots.ended(None)


def test_a_forgotten_buffer_chooses_a_slot_again() -> None:
    slots = Slots()
    slots.learn(1, 0)
    slots.sent(None)
    slots.forget(1)
    assert not slots.known(1) and slots.of(1) is None
    assert slots.choose(1, _fresh(2)) == 1  # (slot 0 ran this editor's requests: not one nobody used)


def test_after_a_pause_a_task_another_editor_started_elsewhere_leaves_the_buffer_to_the_servers_choice() -> None:
    slots = Slots()
    slots.learn(1, 0)
    slots.sent(0)
    slots.ended(0)
    now = time.monotonic()
    assert slots.to_check(1, now + Slots.CHECK_AFTER_S)  # a pause: /slots is read first
    assert not slots.to_check(1, now - 1)  # the next key: it is not
    # the slot's last task is the newest: nobody started one since
    slots.check(1, [SlotState(0, False, 10), SlotState(1, False, 7)])
    assert slots.of(1) == 0
    assert not slots.to_check(1, now + 10)  # once per pause
    # another editor's task started in slot 1 after this editor's last one in slot 0
    slots.sent(0)
    slots.ended(0)
    slots.check(1, [SlotState(0, False, 12), SlotState(1, False, 15)])
    assert slots.of(1) is None and slots.known(1)
    # a task running in the buffer's slot that is not this editor's
    slots.learn(1, 0)
    slots.sent(0)
    slots.ended(0)
    slots.check(1, [SlotState(0, True, 20), SlotState(1, False, 15)])
    assert slots.of(1) is None
    # while a request of this editor runs there, nothing is read
    slots.learn(1, 0)
    slots.sent(0)
    assert not slots.to_check(1, now + 10)
