"""What the guest sees, from the inventory: its view (``vm guest-view``) and its NCCL topology file.

Light: reads through the inventory's read path (no SQLAlchemy, no placement engine), so the command stays
quick as a whole process.
"""

from __future__ import annotations

from vnuma.inventory.reading import open_reader
from vnuma.render.guestview import GuestView
from vnuma.render.nccltopo import nccl_topology
from vnuma.render.view import build_view
from vnuma.services import Settings
from vnuma.services.renderings import rendering_of


def guest_view_of(settings: Settings, vm: str) -> GuestView:
    """What the VM's guest sees (:mod:`vnuma.render.guestview`), rendered with the options it was applied with.

    Raises:
        NotFoundError: no such VM.
    """
    with open_reader(settings.db_url) as reader:
        placement, host, rendering = reader.rendered_vm(vm)
    options, _template = rendering_of(rendering)
    return build_view(host, placement, options).guest


def nccl_topology_of(settings: Settings, vm: str) -> str:
    """The NCCL topology file of the VM's guest (:mod:`vnuma.render.nccltopo`), rendered with the options it was
    applied with.

    Raises:
        NotFoundError: no such VM.
        InvalidInputError: the VM has no GPU.
    """
    with open_reader(settings.db_url) as reader:
        placement, host, rendering = reader.rendered_vm(vm)
    options, _template = rendering_of(rendering)
    return nccl_topology(host, placement, build_view(host, placement, options))
