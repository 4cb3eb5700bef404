"""How requests reach a server: the completion client (HTTP/1.1 streams), the stream parsers,
the limits on what an answer may hold, the owner check of a server on this machine, and each
entry's TLS trust and token."""
