"""The `local-copilot` command (main), its one-shot completion (oneshot) and its options
file (config_file)."""
