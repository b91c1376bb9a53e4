"""The overseer plugin: missions, autonomy levels, the decision gate and escalations.

Its destructive-action rules (:mod:`.destructive`, data in ``destructive_rules.toml``) and the
model-output JSON repair (:mod:`.jsonrepair`) import only the standard library, so the CLI can
use them without starting the daemon.
"""
