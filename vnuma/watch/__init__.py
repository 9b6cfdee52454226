"""The closed loop's pure part: figures of one round, the rules, and their hysteresis.

Pure: no I/O (no clock, files, sockets, SQL or libvirt). The service
(:mod:`vnuma.services.watch`) reads the hosts or recorded rounds, hands each
host's reading here, writes what comes back in one transaction and keeps the
readings' history; everything decided about a round is decided here:

* :mod:`.bandwidth`: a VM's rates between two readings and today's *noisy*
  rule (the share of an L3 domain a VM is entitled to) — the one copy, used by
  ``stats --bandwidth`` and by the loop;
* :mod:`.figures`: a round's per-VM, per-L3-domain and per-cell figures;
* :mod:`.rules`: the named rules (``noisy``, ``remote``, ``capped``,
  ``cell-drift``) and their thresholds;
* :mod:`.hysteresis`: persistence (true in K of the last N samples) and
  clearing (M quiet samples), as a state rebuilt from the stored samples.
"""
