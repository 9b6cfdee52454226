"""The ledger: what every host, cell and tenant holds and has free; the one capacity model.

Pure: no I/O. :class:`~vnuma.placement.ledger.fleet.Fleet` is the only
writer (``add``/``remove``); the engine, the admission rule and the
pre-filter read it. Per-cell claim state lives in :mod:`.cell`, per-host
state and hardware shapes in :mod:`.host`, what one placement changes on its
host in :mod:`.booking`, and :mod:`.arrays` mirrors the
free capacity in numpy arrays for vectorized pre-filtering (read-only to
everything but the fleet); :mod:`.candidates` keeps the hosts the engine's
fast path looks at, and :mod:`.kinds` says which hosts a ledger of part of
a fleet must hold to have the same.
"""
