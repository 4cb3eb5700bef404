"""`local-copilot lsp`: the completion pipeline as a language server for any editor (server.py),
the documents it keeps in sync (documents.py), typing through (typed.py), its options
(options.py) and the items it answers with (items.py)."""
