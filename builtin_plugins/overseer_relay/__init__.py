"""The ``overseer-relay`` plugin: the decision path that asks the overseer's model through the
``inference`` service (see :mod:`.relay`)."""
