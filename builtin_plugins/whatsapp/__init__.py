"""The ``whatsapp`` plugin: the brain over the WhatsApp Cloud API (Meta's official webhooks and
Graph API), with every delivery's signature checked, replays deduplicated and strangers kept
silent. See :mod:`.adapter` and ``docs/platforms.md``."""
