"""The service as the CLI's backend (``vnuma --server URL``): each call is one request, each answer decoded
back into what the local services return, each problem raised as the very error the CLI would raise.

The CLI prints what it gets the same way whichever backend answered, so a
command prints through a service exactly what it prints on the inventory
itself (a test runs both). Options a command leaves unset (page size,
strategy) take the service's configuration, not the caller's. A service that
cannot be reached is an inventory problem (exit 6), as an unreachable
database is.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx

from vnuma import errors
from vnuma.codec import host_from_dict, placement_from_dict, tenant_from_dict
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.placement.result import PlacementResult, Rejection, Unfit
from vnuma.topology import Host

TIMEOUT_S = 600.0  # a capacity or stats run on a large fleet takes a while; the server bounds nothing less


def _rejections(items: list[dict[str, Any]]) -> tuple[Rejection, ...]:
    return tuple(
        Rejection(r["host"], r["check"], r["reason"], r.get("hint"), r.get("gist"), r.get("missing")) for r in items
    )


def _unfit(items: list[dict[str, Any]]) -> tuple[Unfit, ...]:
    """``explain``'s ``alternatives``: each alternative tried that fits on no host."""
    return tuple(Unfit(u["alternative"], u["asked"], _rejections(u["rejections"]), u["refused"]) for u in items)


class Client:
    """One service at ``url`` (``http[s]://HOST:PORT``), called with bearer ``token``."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT_S)

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, **params: Any) -> Any:
        """The JSON answer of one request.

        Raises:
            VnumaError: the service's problem, as the class it names (its message, hint and exit code).
            InventoryError: the service cannot be reached, or answers something that is not vnuma's.
        """
        query = {k: v for k, v in params.items() if v is not None}
        try:
            got = self._http.request(method, path, json=body, params=query)
        except httpx.HTTPError as err:
            raise errors.InventoryError(
                f"service {self.url} cannot be reached: {err}", hint="check --server / VNUMA_SERVER and `vnuma serve`"
            ) from None
        if got.headers.get("content-type", "").startswith("application/problem+json"):
            raise _error(got.json())
        if got.status_code >= 400 or not got.headers.get("content-type", "").startswith("application/json"):
            raise errors.InventoryError(f"service {self.url} answered {got.status_code} {got.reason_phrase}",
                                        hint="is --server a vnuma service?")
        return got.json()

    # --- the calls the CLI makes ---------------------------------------------------------------

    def host_summaries(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/v1/hosts"))

    def host(self, name: str) -> Host:
        return host_from_dict(self.host_document(name))

    def host_document(self, name: str) -> dict[str, Any]:
        """``host show --json``: the topology with each GPU's mode and free partitions."""
        return dict(self.call("GET", f"/v1/hosts/{_seg(name)}"))

    def add_host(self, name: str, uri: str | None, demo: bool, strict: bool = False) -> dict[str, Any]:
        """The new host's summary and the parts left out (``host add --json``)."""
        return dict(self.call("POST", "/v1/hosts", {"name": name, "uri": uri, "demo": demo, "strict": strict}))

    def import_host(
        self, name: str, capabilities: tuple[str, bytes] | None, nodedevs: list[tuple[str, bytes]],
        hwloc: tuple[str, bytes] | None, strict: bool = False,
    ) -> dict[str, Any]:
        """The new host's summary and the parts left out; the files' contents (read here) go in the request."""

        def doc(d: tuple[str, bytes] | None) -> dict[str, str] | None:
            return None if d is None else {"file": d[0], "content_base64": base64.b64encode(d[1]).decode()}

        body = {"name": name, "capabilities": doc(capabilities), "nodedev": [doc(d) for d in nodedevs],
                "hwloc": doc(hwloc), "strict": strict}
        return dict(self.call("POST", "/v1/hosts/import", body))

    def refresh_host(self, name: str, strict: bool = False) -> dict[str, Any]:
        """``host refresh --json``: what changed and the parts the new read left out."""
        return dict(self.call("POST", f"/v1/hosts/{_seg(name)}/refresh", strict="true" if strict else None))

    def reserve(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """``host reserve``: the host after the change (``host show --json``)."""
        return dict(self.call("POST", f"/v1/hosts/{_seg(name)}/reserve", body))

    def remove_host(self, name: str) -> None:
        self.call("DELETE", f"/v1/hosts/{_seg(name)}")

    def set_cordoned(self, name: str, cordoned: bool) -> bool:
        """Whether it was cordoned before."""
        doc = self.call("POST", f"/v1/hosts/{_seg(name)}/{'cordon' if cordoned else 'uncordon'}")
        return bool(doc["cordoned"]) != bool(doc["changed"])

    def device_change(self, action: str, host: str, device: str, **body: Any) -> dict[str, Any]:
        """``device taint|untaint|clean|set``'s document."""
        return dict(self.call("POST", f"/v1/hosts/{_seg(host)}/devices/{_seg(device)}/{action}", body or None))

    def device_list(self, host: str | None, state: str | None) -> list[dict[str, Any]]:
        """``device list --json``."""
        return list(self.call("GET", "/v1/devices", host=host, state=state))

    def host_set(self, name: str, after_release: str) -> dict[str, Any]:
        """``host set --json``."""
        return dict(self.call("POST", f"/v1/hosts/{_seg(name)}/set", {"after_release": after_release}))

    def tenant_rows(self, only: str | None = None) -> list[dict[str, Any]]:
        if only is None:
            return list(self.call("GET", "/v1/tenants"))
        return [self.call("GET", f"/v1/tenants/{_seg(only)}")]

    def create_tenant(self, tenant: Tenant) -> Tenant:
        body = {"name": tenant.name, "isolation": tenant.isolation.value, "max_vcpus": tenant.max_vcpus,
                "max_gpus": tenant.max_gpus, "llc": None if tenant.llc_kib is None else f"{tenant.llc_kib}KiB",
                "llc_ways": tenant.llc_ways, "mem_bw": tenant.mem_bw}
        return tenant_from_dict(self.call("POST", "/v1/tenants", body))

    def update_tenant(
        self, name: str, isolation: Isolation | None, quotas: dict[str, int | None], slices: dict[str, str]
    ) -> tuple[Tenant, Tenant]:
        """``quotas``: the quotas to change (None: unlimited); ``slices``: ``--llc``/``--llc-ways``/``--mem-bw``
        as given (``none`` clears); the others are kept."""
        numbers = {k: v if k == "llc" or v.strip().lower() == "none" else _int_or_text(v) for k, v in slices.items()}
        body: dict[str, Any] = {**quotas, **numbers, **({"isolation": isolation.value} if isolation else {})}
        doc = self.call("PATCH", f"/v1/tenants/{_seg(name)}", body)
        return tenant_from_dict(doc["before"]), tenant_from_dict({k: v for k, v in doc.items() if k != "before"})

    def remove_tenant(self, name: str) -> None:
        self.call("DELETE", f"/v1/tenants/{_seg(name)}")

    def place(self, body: dict[str, Any]) -> tuple[str, PlacementResult]:
        """The VM's name and the engine's answer (a refusal comes back with every host's rejection)."""
        try:
            doc = self.call("POST", "/v1/place", body)
        except errors.NoPlacementError as err:
            return err.vm, PlacementResult(None, err.rejections, unfit=err.unfit)
        explained = doc.pop("explain", None) or {"scores": [], "rejections": []}
        scores = tuple((s["host"], int(s["score"])) for s in explained["scores"])
        chosen = placement_from_dict(doc)
        return chosen.vm, PlacementResult(
            chosen, _rejections(explained["rejections"]), scores, explained.get("cells_decided_by"),
            _unfit(explained.get("alternatives", [])),
        )

    def list_vms(self, tenant: str | None, host: str | None) -> list[tuple[Placement, str]]:
        return [_vm(d) for d in self.call("GET", "/v1/vms", tenant=tenant, host=host)]

    def get_vm(self, name: str) -> tuple[Placement, str]:
        return _vm(self.call("GET", f"/v1/vms/{_seg(name)}"))

    def release_vm(self, name: str, undefine: bool) -> tuple[Placement, str]:
        """The VM as it was."""
        return _vm(self.call("POST", f"/v1/vms/{_seg(name)}/release", {"undefine": undefine}))

    def render(self, vm: str, options: dict[str, Any]) -> str:
        return str(self.call("POST", f"/v1/vms/{_seg(vm)}/render", options)["xml"])

    def apply(self, vm: str, options: dict[str, Any]) -> dict[str, Any]:
        """``{"vm", "diff"}`` for a dry run, else the VM after the change."""
        return dict(self.call("POST", f"/v1/vms/{_seg(vm)}/apply", options))

    def start_vm(self, vm: str) -> tuple[Placement, str]:
        return _vm(self.call("POST", f"/v1/vms/{_seg(vm)}/start"))

    def stop_vm(self, vm: str) -> tuple[Placement, str]:
        return _vm(self.call("POST", f"/v1/vms/{_seg(vm)}/stop"))

    def rebalance(self, body: dict[str, Any]) -> dict[str, Any]:
        """The plan's document (also when it makes no room: the CLI decides from it, as it does locally)."""
        try:
            return dict(self.call("POST", "/v1/rebalance", body))
        except errors.NoRoomError as err:
            if err.plan is None:
                raise
            return err.plan

    def finish_run(self, resume: bool) -> dict[str, Any]:
        """``rebalance --resume`` or ``--abort``: ``{"run"}``."""
        return dict(self.call("POST", f"/v1/rebalance/{'resume' if resume else 'abort'}"))

    def repin(self, vm: str, body: dict[str, Any]) -> dict[str, Any]:
        """The one-move plan's document (with ``"run"`` when carried out)."""
        return dict(self.call("POST", f"/v1/vms/{_seg(vm)}/repin", body))

    def migrate(self, vm: str, body: dict[str, Any]) -> dict[str, Any]:
        """The one-move plan's document (with ``"run"`` when carried out)."""
        return dict(self.call("POST", f"/v1/vms/{_seg(vm)}/migrate", body))

    def drain(self, host: str, body: dict[str, Any]) -> dict[str, Any]:
        """The drain plan's document (with ``"run"`` when carried out); a drain that would leave VMs behind
        raises :class:`~vnuma.errors.NoRoomError` carrying it."""
        return dict(self.call("POST", f"/v1/hosts/{_seg(host)}/drain", body))

    def device_drain(self, host: str, device: str, body: dict[str, Any]) -> dict[str, Any]:
        """``device taint --effect drain``: the plan's document with ``"taint"`` (and ``"run"`` when carried out);
        a drain that would leave VMs on the device raises :class:`~vnuma.errors.NoRoomError` carrying it."""
        return dict(self.call("POST", f"/v1/hosts/{_seg(host)}/devices/{_seg(device)}/drain", body))

    def guest_view(self, vm: str) -> dict[str, Any]:
        """``vm guest-view --json``."""
        return dict(self.call("GET", f"/v1/vms/{_seg(vm)}/guest-view"))

    def nccl_topology(self, vm: str) -> str:
        """``vm guest-view --nccl-topo``: the file's text."""
        return str(self.call("GET", f"/v1/vms/{_seg(vm)}/guest-view/nccl-topo")["xml"])

    def launch(self, vm: str, framework: str) -> dict[str, Any]:
        """``vm guest-view --launch FRAMEWORK --json``."""
        return dict(self.call("GET", f"/v1/vms/{_seg(vm)}/guest-view/launch", framework=framework))

    def cloud_init(self, vm: str, framework: str | None) -> str:
        """``vm guest-view --cloud-init [--launch FRAMEWORK]``: the user-data document."""
        return str(self.call("GET", f"/v1/vms/{_seg(vm)}/guest-view/cloud-init", framework=framework)["user_data"])

    def log(self, **filters: Any) -> list[dict[str, Any]]:
        """``log --json``: ``vm``, ``host``, ``tenant``, ``since``, ``limit`` as the command takes them."""
        return list(self.call("GET", "/v1/log", **filters))

    def tokens(self) -> list[dict[str, Any]]:
        return list(self.call("GET", "/v1/tokens"))

    def create_token(self, name: str, role: str, tenant: str | None, expires: str | None) -> dict[str, Any]:
        """The new token (``"token"``: its secret, shown once)."""
        return dict(self.call("POST", "/v1/tokens", {"name": name, "role": role, "tenant": tenant, "expires": expires}))

    def revoke_token(self, name: str) -> dict[str, Any]:
        return dict(self.call("POST", f"/v1/tokens/{_seg(name)}/revoke"))

    def stats(self, vm: str | None, host: str | None) -> dict[str, Any]:
        return dict(self.call("GET", "/v1/stats", vm=vm, host=host))

    def bandwidth(self, vm: str | None, host: str | None, interval: str) -> dict[str, Any]:
        return dict(self.call("POST", "/v1/stats/bandwidth", {"vm": vm, "host": host, "interval": interval}))

    def capacity(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.call("POST", "/v1/capacity", body))


def _int_or_text(value: str) -> int | str:
    """A count as given on the command line: a number when it is one (the service says what is wrong with
    any other text, as the command would)."""
    text = value.strip()
    return int(text) if text.isdecimal() and len(text) <= 9 else text


def _seg(name: str) -> str:
    """A name as one path segment (``/`` and the like escaped: names are data)."""
    from urllib.parse import quote

    return quote(name, safe="")


def _vm(doc: dict[str, Any]) -> tuple[Placement, str]:
    state = str(doc["state"])
    return placement_from_dict({k: v for k, v in doc.items() if k not in ("state", "released")}), state


def _error(problem: dict[str, Any]) -> errors.VnumaError:
    """The error a problem body names, with its message and hint."""
    detail, hint = str(problem.get("detail", "")), problem.get("hint")
    name = problem.get("error")
    if name == "NoPlacementError":
        err = errors.NoPlacementError(str(problem.get("vm", "")), _rejections(problem.get("rejections", [])),
                                      hint=hint, unfit=_unfit(problem.get("alternatives", [])))
        err.args = (detail,)
        return err
    if name == "NoRoomError":
        return errors.NoRoomError(detail, hint=hint, plan=problem.get("plan"))
    if name == "HypervisorError":
        return errors.HypervisorError(detail, hint=hint)
    cls = getattr(errors, str(name), None)
    if isinstance(cls, type) and issubclass(cls, errors.VnumaError):
        return cls(detail, hint=hint)
    status = problem.get("status")
    if status == 429:
        return errors.ConflictError(detail, hint=hint)
    return errors.InvalidInputError(f"service: {detail}", hint=hint)
