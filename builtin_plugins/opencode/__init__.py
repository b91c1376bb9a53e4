"""The OpenCode provider plugin: command line, settings, trust pre-seeding, session ids, screen patterns."""
