"""The ``deriver`` plugin: what each agent's screen means (signals, prompt decisions)."""
