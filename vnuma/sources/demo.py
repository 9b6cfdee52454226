"""Where the shipped demo host lives: an AI inference server in two files.

Pure: no I/O (paths only; callers read the files). ``demo-capabilities.xml``
is its ``virsh capabilities`` (2 sockets, SNC2: 4 NUMA cells x 16 cores x 2
threads, 256 GiB per cell with 2 MiB and 1 GiB pages, distances 10/12/21).
``demo-node.xml`` is a libvirt test-driver node file holding its node devices: 8 NVIDIA H100
GPUs and 4 ConnectX-7 NICs (2 GPUs + 1 NIC per cell), each behind its own
PCIe root port. The test driver ignores NUMA topology in node files, hence
the separate capabilities document.
"""

from __future__ import annotations

from pathlib import Path

from vnuma.paths import data_dir

DEMO_CAPABILITIES = "demo-capabilities.xml"
DEMO_NODE = "demo-node.xml"
# The topology override the inventory records for a host added with --demo:
# "the demo host this vnuma ships", found here again at every refresh. Never
# the files' absolute paths, so an inventory outlives a moved or re-cloned checkout.
DEMO_OVERRIDE = "demo"


def demo_capabilities_path() -> Path:
    """The demo host's ``virsh capabilities`` document."""
    return data_dir() / DEMO_CAPABILITIES


def demo_node_path() -> Path:
    """The demo host's libvirt test-driver node file (absolute path)."""
    return data_dir() / DEMO_NODE


DEMO_URI = "test:///vnuma-demo"
"""The demo host's URI as the inventory stores it: never the checkout's path, so an inventory
outlives a moved or re-cloned checkout. :func:`libvirt_uri` turns it into the node file's."""


def libvirt_uri(uri: str) -> str:
    """The URI to open for a host's stored ``uri``: the demo host's is the shipped node file
    (``test:///ABS/PATH/demo-node.xml``) of this vnuma; every other URI is itself."""
    return f"test://{demo_node_path().resolve()}" if uri == DEMO_URI else uri
