"""Next edits: the edit the user will make next, anywhere near the cursor.

`history.py` keeps the user's recent edits (the editor records them, lua/local_copilot/edit_recorder.lua);
`formats.py` renders them with the buffer into the prompt of a next-edit model (Sweep, Zeta,
Zeta-2) and reads its answer back; `edit.py` turns a rewritten region into one edit;
`request.py` runs the requests (latest wins per buffer) on the raw completion endpoint of
the next-edit backend.
"""
