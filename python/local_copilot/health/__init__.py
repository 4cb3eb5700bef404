"""`:checkhealth local_copilot` and `local-copilot doctor`: the report (report), the
judgements (checks) and what is probed on this machine (probes)."""
