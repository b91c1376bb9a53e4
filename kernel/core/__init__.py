"""The kernel proper: store, event bus, hook bus, plugin registry, contexts, path guard, settings. No domain code."""
