"""Building the prompt: the window around the cursor fitted to the server's context
(window, budget, context), cross-file chunks (ring) and FIM templates (templates)."""
