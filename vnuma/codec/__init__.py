"""Plain-dict codecs for hosts, placements and tenants (the ``--json`` and inventory shapes).

Pure: no I/O. The dict shapes are public contracts that operators' scripts
rely on: keys may be added, never renamed or removed. Every ``*_from_dict``
validates its input and raises :class:`InvalidInputError` naming the key
path (``cells[1].cpus[3].siblings``); ``x_from_dict(x_to_dict(v)) == v``.

Keys for dataclass fields that have a default may be omitted on input
(``uri``, ``devices``, ``pages``, ``parent``, ...); the others are required.
Maps keyed by a number (page size, cell id) use the decimal string as key,
in the order of the dataclass tuples, so JSON round trips keep that order.
"""

from vnuma.codec.hosts import host_from_dict, host_summary, host_to_dict, summary_text, use_from_dict
from vnuma.codec.leftout import imported_summary, left_out_from_list, left_out_to_list
from vnuma.codec.placements import placement_from_dict, placement_to_dict, tenant_from_dict, tenant_to_dict
from vnuma.codec.resctrl import classes_from_dict

__all__ = [
    "classes_from_dict",
    "host_from_dict",
    "host_summary",
    "host_to_dict",
    "imported_summary",
    "left_out_from_list",
    "left_out_to_list",
    "placement_from_dict",
    "placement_to_dict",
    "summary_text",
    "tenant_from_dict",
    "tenant_to_dict",
    "use_from_dict",
]
