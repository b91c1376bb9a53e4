"""The ``overseer-parked`` plugin: the decision path that hands each mission's decisions to an
overseer coding-agent CLI parked in tmux (see :mod:`.parked`)."""
