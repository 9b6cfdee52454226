"""What the guest sees, from the inventory: its view (``vm guest-view``), its NCCL topology file, the launch lines
and the cloud-init document.

Light: reads through the inventory's read path (no SQLAlchemy, no placement engine), so the command stays
quick as a whole process.
"""

from __future__ import annotations

from vnuma.inventory.reading import open_reader
from vnuma.render.guestview import GuestView
from vnuma.render.launch import LaunchNode, check_framework, cloud_init, launch_lines
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


def launch_of(settings: Settings, vm: str, framework: str | None) -> tuple[GuestView, tuple[LaunchNode, ...]]:
    """The guest view of the VM and the launch lines of ``framework`` on it (:mod:`vnuma.render.launch`).

    Raises:
        OptionsError: an unknown framework (before anything is read).
        NotFoundError: no such VM.
    """
    check_framework(framework)
    view = guest_view_of(settings, vm)
    return view, launch_lines(view, framework)


def cloud_init_of(settings: Settings, vm: str, framework: str | None) -> str:
    """The cloud-init user-data document writing the VM's NCCL topology file (none without GPUs) and the
    environment of ``framework``'s launch lines into the guest (:func:`vnuma.render.launch.cloud_init`).

    Raises:
        OptionsError: an unknown framework.
        NotFoundError: no such VM.
    """
    check_framework(framework)
    with open_reader(settings.db_url) as reader:
        placement, host, rendering = reader.rendered_vm(vm)
    options, _template = rendering_of(rendering)
    built = build_view(host, placement, options)
    lines = launch_lines(built.guest, framework)
    has_gpu = any(d.cuda_index is not None for d in built.guest.devices)
    return cloud_init(built.guest, lines, nccl_topology(host, placement, built) if has_gpu else None)
