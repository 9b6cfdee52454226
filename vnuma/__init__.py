"""vnuma: NUMA-aware placement of tenant VMs on libvirt hypervisors."""

__version__ = "0.1.0"
