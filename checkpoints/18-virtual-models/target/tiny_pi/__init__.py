"""tiny_pi: a tiny LLM agent runtime, rebuilt one chapter at a time."""
