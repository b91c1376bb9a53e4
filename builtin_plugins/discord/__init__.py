"""The ``discord`` plugin: the brain on Discord (mentions and DMs, replies streamed by message
edits, strangers kept silent, Discord roles mapped to Elowen projects, a gateway watchdog).
See :mod:`.adapter` and ``docs/platforms.md``."""
