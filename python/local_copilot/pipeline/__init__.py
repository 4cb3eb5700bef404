"""The completion pipeline every surface shares: a snapshot prepared into a prompt, the
suggestion cache, the reading of one answer and its post-processing."""
