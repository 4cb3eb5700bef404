"""Instruction edits: select code, say what to change, get the replacement from the chat
endpoint of a backend. `prompt` builds the messages, `chat` speaks each kind's chat API,
`answer` keeps the code of an answer, `runner` runs the edits of each buffer."""
