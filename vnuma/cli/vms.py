"""``vnuma vm``: one group, its commands defined beside the use cases they print.

``list`` and ``show`` live in :mod:`.vmview`, ``start``, ``stop``,
``undefine`` and ``release`` in :mod:`.applying`, ``repin`` and ``migrate``
in :mod:`.moving`, ``guest-view`` in :mod:`.guestview`; importing them registers them all on the group.
"""

from __future__ import annotations

from vnuma.cli import applying, guestview, moving, vmview
from vnuma.cli.placing import vm_app as app

__all__ = ["app", "applying", "guestview", "moving", "vmview"]
