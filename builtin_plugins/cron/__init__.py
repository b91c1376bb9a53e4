"""The ``cron`` plugin: scheduled and one-shot prompts run as their owner's brain turns."""
