"""Request bodies: each command's options by their long names with underscores, in the CLI's own units.

Sizes and lists stay the CLI's text (``"memory": "64GiB"``, ``"cell_vcpus":
"12,4"``) and are read by the same service functions as the CLI's; choices
are the CLI's words. Unknown members and values of the wrong JSON type are
refused (422): numbers, strings and booleans are strict (no ``"16"`` for
16, no ``1`` for true); choices take the CLI's words.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, create_model

from vnuma.placement.altmodel import MAX_ALTERNATIVES
from vnuma.placement.asks import ASKS, Ask, Form
from vnuma.placement.model import (
    Isolation,
)
from vnuma.placement.objectives import Strategy


class Body(BaseModel):
    """Unknown members refused."""

    model_config = ConfigDict(extra="forbid")


def _member(ask: Ask) -> tuple[Any, Any]:
    """A request option as a body member: its JSON type and default, described by its help."""
    choice: Any = None
    if ask.form is Form.CHOICE:
        choice = Literal[ask.words] if isinstance(ask.choices, tuple) else ask.choices  # type: ignore[valid-type]
        choice = choice | None if ask.default is None else choice
    kind: Any = {
        Form.COUNT: Annotated[StrictInt, Field(ge=0)], Form.NUMBER: StrictInt | None, Form.TEXT: StrictStr | None,
        Form.NODES: StrictStr | StrictInt, Form.NICS: StrictInt | Literal["per-gpu"] | None, Form.CHOICE: choice,
        Form.ALTERNATIVES: Annotated[list[dict[StrictStr, StrictStr | StrictInt | None] | StrictStr],
                                     Field(max_length=MAX_ALTERNATIVES)] | None,
    }[ask.form]
    if ask.name == "vcpus":
        kind = Annotated[StrictInt, Field(ge=0)] | None
    return kind, Field(ask.default, description=ask.help)


PlaceBody = create_model(
    "PlaceBody",
    __base__=Body,
    __doc__="``vnuma place``'s options, one member per request option (``tenant`` may be left out by a tenant "
            "token: its own tenant), and how to decide.",
    **{ask.name: _member(ask) for ask in ASKS},
    strategy=(Strategy | None, Field(None, description="Host and cell choice (default: the service's).")),
    dry_run=(StrictBool, Field(False, description="Decide, but claim nothing.")),
    explain=(StrictBool, Field(False, description="Every host's rejection and score, as \"explain\".")),
)
"""The body of ``POST /v1/place``, made from :data:`vnuma.placement.asks.ASKS`."""


class BandwidthBody(Body):
    """``vnuma stats [VM] [--host H] --bandwidth [--interval TIME]`` (measured by the service's libvirt
    connections; saved ``--domstats`` files are read where the command runs)."""

    vm: StrictStr | None = None
    host: StrictStr | None = None
    interval: StrictStr = "2s"


class TenantCreateBody(Body):
    """``vnuma tenant create``."""

    name: StrictStr
    isolation: Isolation = Isolation.CORE
    max_vcpus: StrictInt | None = Field(None, ge=0)
    max_gpus: StrictInt | None = Field(None, ge=0)
    llc: StrictStr | None = None
    llc_ways: StrictInt | None = None
    mem_bw: StrictInt | None = None


class TenantUpdateBody(Body):
    """``vnuma tenant update``: a member left out keeps its value; a quota of null or "none" is unlimited."""

    isolation: Isolation | None = None
    max_vcpus: StrictInt | Literal["none"] | None = None
    max_gpus: StrictInt | Literal["none"] | None = None
    llc: StrictStr | None = None
    llc_ways: StrictInt | Literal["none"] | None = None
    mem_bw: StrictInt | Literal["none"] | None = None


class ReleaseBody(Body):
    """``vnuma vm release``."""

    undefine: StrictBool = False


class CapacityBody(Body):
    """``vnuma capacity``."""

    shapes: list[StrictStr] = Field(min_length=1, max_length=64)
    count: StrictInt | None = None
    host: StrictStr | None = None
    tenant: StrictStr | None = None
    strategy: Strategy | None = None


class Carried(Body):
    """What carrying a plan out may do to running VMs (``--allow-restart``, ``--allow-migrate``); the request
    is its own confirmation (``--yes``)."""

    allow_restart: StrictBool = False
    allow_migrate: StrictBool = False


class RebalanceBody(Carried):
    """``vnuma rebalance``: the plan, carried out (journaled) with ``apply``."""

    host: StrictStr | None = None
    objective: Literal["locality", "room", "spread-tenants", "fragmentation", "bandwidth"] = "locality"
    make_room_for: StrictStr | None = None
    max_moves: StrictInt = Field(3, ge=0)
    time_limit: float = Field(10.0, gt=0, le=600)
    solver: Literal["search", "cp-sat"] | None = None
    apply: StrictBool = False


class DrainBody(Carried):
    """``vnuma host drain``: cordon, plan, and with ``apply`` carry the plan out."""

    max_moves: StrictInt | None = Field(None, ge=0)
    partial: StrictBool = False
    time_limit: float = Field(10.0, gt=0, le=600)
    solver: Literal["search", "cp-sat"] | None = None
    apply: StrictBool = False


class DeviceDrainBody(Carried):
    """``vnuma device taint HOST DEVICE --reason TEXT --effect drain``: taint, plan, and with ``apply`` carry the
    plan out."""

    reason: StrictStr
    partial: StrictBool = False
    apply: StrictBool = False


class RepinBody(Body):
    """``vnuma vm repin``."""

    cells: StrictStr | None = None
    live: StrictBool = False
    dry_run: StrictBool = False


class MigrateBody(Body):
    """``vnuma vm migrate``."""

    to: StrictStr
    live: StrictBool = False
    cold: StrictBool = False
    dry_run: StrictBool = False


class TokenCreateBody(Body):
    """``vnuma token create``."""

    name: StrictStr
    role: Literal["admin", "operator", "reader", "tenant"]
    tenant: StrictStr | None = None
    expires: StrictStr | None = None


class HostAddBody(Body):
    """``vnuma host add NAME --uri URI | --demo`` (topology files stay on the command line: a service reads
    no files a caller names)."""

    name: StrictStr
    uri: StrictStr | None = None
    demo: StrictBool = False
    strict: StrictBool = False


class Document(Body):
    """One input file of ``host import``: its name (for messages) and its bytes, base64."""

    file: StrictStr
    content_base64: StrictStr


class HostImportBody(Body):
    """``vnuma host import NAME --capabilities FILE [--nodedev FILE]... | --hwloc FILE``, the files' contents
    sent along (the CLI reads them where it runs)."""

    name: StrictStr
    capabilities: Document | None = None
    nodedev: list[Document] = Field(default_factory=list, max_length=256)
    hwloc: Document | None = None
    strict: StrictBool = False


class ReserveBody(Body):
    """``vnuma host reserve NAME [--cpus LIST] [--llc-ways N] [--mem-bw-limit PCT]``."""

    cpus: StrictStr | None = None
    llc_ways: StrictInt | None = None
    mem_bw_limit: StrictInt | None = None


class TaintBody(Body):
    """``vnuma device taint HOST DEVICE --reason TEXT [--effect no-schedule|drain]`` (a drain's run is its own
    request: ``POST /v1/hosts/{host}/devices/{device}/drain``)."""

    reason: StrictStr
    effect: StrictStr = "no-schedule"


class AfterReleaseBody(Body):
    """``vnuma host set HOST --after-release clean|free`` and ``vnuma device set HOST DEVICE --after-release``."""

    after_release: StrictStr


class RenderBody(Body):
    """``vnuma render``/``apply`` options (the operator's own template stays on the command line)."""

    domain_type: StrictStr | None = None
    memnode_mode: StrictStr | None = None
    iothreads: StrictInt | None = Field(None, ge=0)
    sockets: StrictInt | None = Field(None, ge=1)
    cores: StrictInt | None = Field(None, ge=1)
    threads: StrictInt | None = Field(None, ge=1)
    guest_hints: StrictBool = False


class ApplyBody(RenderBody):
    """``vnuma apply``."""

    start: StrictBool = False
    dry_run: StrictBool = False
