"""Finding and running model servers (llama-server now; vLLM and Ollama recipes later)."""
