"""The overseer plugin: missions, autonomy levels, the threshold rule, destructive-action
escalation, the escalations inbox, reviews and agent Q&A. Decisions are scored by a decision
path plugin (``overseer-relay``, ``overseer-parked``) behind the ``register_decision_paths``
hookspec; with none enabled, every decision waits for a human.
"""
