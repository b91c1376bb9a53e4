"""The ``notify`` plugin: proactive notifications to every surface a user reads — the web UI
(live toast and list), the CLI's list, web push, and chat platforms that register as surfaces —
through a durable outbox with at-least-once delivery. See ``docs/notifications.md``."""
