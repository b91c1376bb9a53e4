"""The ``core-loop`` plugin: intake, plan into the task ledger, a bounded project executor,
progress pulses and the proof-of-work receipt (see ``docs/core-loop.md``)."""
