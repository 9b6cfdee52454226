"""VMs: ``place``, ``vm list|show|guest-view|release|start|stop`` (guest-view's NCCL topology, launch lines and
cloud-init document too), ``render``, ``apply``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from vnuma.api import auth
from vnuma.api.bodies import ApplyBody, PlaceBody, ReleaseBody, RenderBody
from vnuma.api.gate import Caller, Change
from vnuma.services import Settings
from vnuma.services.tokens import Token
from vnuma.services.warm import WarmFleet


def routes(app: FastAPI, settings: Settings, change: Change, warm: WarmFleet) -> None:
    """``place`` and the VM reads and release; placements decide on ``warm``."""
    from vnuma.documents import explain_doc, released_doc, vm_doc

    @app.post("/v1/place", summary="vnuma place")
    def place(body: PlaceBody, token: Caller, request: Request) -> JSONResponse:
        from vnuma.codec import placement_to_dict
        from vnuma.placement.asks import BY_NAME
        from vnuma.placement.objectives import Strategy
        from vnuma.services.placing import place_vm, require_chosen
        from vnuma.services.requests import place_request

        def run() -> JSONResponse:
            auth.allow(token, auth.OPERATE, "place VMs")
            asked = body.model_dump(include=set(BY_NAME), mode="json")
            asked["tenant"] = auth.acting_for(token, body.tenant)
            vm = place_request(asked, page_size_default=settings.page_size)
            strategy = body.strategy or Strategy(settings.strategy)
            vm, result = place_vm(settings, vm, strategy, dry_run=body.dry_run, explain=body.explain, view=warm)
            chosen = require_chosen(vm, result)
            doc = placement_to_dict(chosen)
            if body.explain:
                doc["explain"] = explain_doc(result)
            return JSONResponse(doc, status_code=200 if body.dry_run else 201)

        if body.dry_run:
            return run()
        tenant = body.tenant or auth.seen_by(token)
        return change(request, token, {"vm": body.name, "tenant": tenant, "host": body.host}, run)

    @app.get("/v1/vms", summary="vnuma vm list")
    def vm_list(token: Caller, tenant: str | None = None, host: str | None = None) -> list[dict[str, Any]]:
        from vnuma.services.queries import list_vms

        auth.allow(token, auth.SCOPED_READ, "read VMs")
        return [vm_doc(p, s) for p, s in list_vms(settings, tenant, host, seen_by=auth.seen_by(token))]

    @app.get("/v1/vms/{name}", summary="vnuma vm show")
    def vm_show(name: str, token: Caller) -> dict[str, Any]:
        from vnuma.services.queries import get_vm

        auth.allow(token, auth.SCOPED_READ, "read VMs")
        return vm_doc(*get_vm(settings, name, seen_by=auth.seen_by(token)))

    @app.get("/v1/vms/{name}/guest-view", summary="vnuma vm guest-view")
    def vm_guest_view(name: str, token: Caller) -> dict[str, Any]:
        from vnuma.render.guestview import as_dict
        from vnuma.services.guestfiles import guest_view_of
        from vnuma.services.queries import get_vm

        auth.allow(token, auth.SCOPED_READ, "read VMs")
        get_vm(settings, name, seen_by=auth.seen_by(token))
        return dict(as_dict(guest_view_of(settings, name)))

    @app.get("/v1/vms/{name}/guest-view/nccl-topo", summary="vnuma vm guest-view --nccl-topo")
    def vm_nccl_topo(name: str, token: Caller) -> dict[str, Any]:
        from vnuma.services.guestfiles import nccl_topology_of
        from vnuma.services.queries import get_vm

        auth.allow(token, auth.SCOPED_READ, "read VMs")
        get_vm(settings, name, seen_by=auth.seen_by(token))
        return {"vm": name, "xml": nccl_topology_of(settings, name)}

    @app.get("/v1/vms/{name}/guest-view/launch", summary="vnuma vm guest-view --launch")
    def vm_launch(name: str, token: Caller, framework: str) -> dict[str, Any]:
        from vnuma.render.launch import as_launch_dict
        from vnuma.services.guestfiles import launch_of
        from vnuma.services.queries import get_vm

        auth.allow(token, auth.SCOPED_READ, "read VMs")
        get_vm(settings, name, seen_by=auth.seen_by(token))
        view, lines = launch_of(settings, name, framework)
        return dict(as_launch_dict(view, framework, lines))

    @app.get("/v1/vms/{name}/guest-view/cloud-init", summary="vnuma vm guest-view --cloud-init")
    def vm_cloud_init(name: str, token: Caller, framework: str | None = None) -> dict[str, Any]:
        from vnuma.services.guestfiles import cloud_init_of
        from vnuma.services.queries import get_vm

        auth.allow(token, auth.SCOPED_READ, "read VMs")
        get_vm(settings, name, seen_by=auth.seen_by(token))
        return {"vm": name, "user_data": cloud_init_of(settings, name, framework)}

    @app.post("/v1/vms/{name}/release", summary="vnuma vm release")
    def vm_release(name: str, token: Caller, request: Request, body: ReleaseBody | None = None) -> dict[str, Any]:
        from vnuma.services.applying import release_vm
        from vnuma.services.queries import get_vm

        def run() -> dict[str, Any]:
            auth.allow(token, auth.OPERATE, "release VMs")
            placement, state = get_vm(settings, name, seen_by=auth.seen_by(token))
            notes = release_vm(settings, name, undefine=body.undefine if body else False)
            return released_doc(placement, state) | ({"notes": notes} if notes else {})

        return change(request, token, {"vm": name, "tenant": auth.seen_by(token)}, run)




def domain_routes(app: FastAPI, settings: Settings, change: Change) -> None:
    """``render``, ``apply``, ``vm start|stop``: a VM's libvirt domain."""
    from vnuma.documents import vm_doc
    from vnuma.services import applying
    from vnuma.services.queries import get_vm

    def options(body: RenderBody) -> Any:
        topology = (body.sockets, body.cores, body.threads)
        return applying.render_options(
            settings, body.domain_type, body.memnode_mode, body.iothreads, topology, body.guest_hints
        )

    @app.post("/v1/vms/{name}/render", summary="vnuma render")
    def render(name: str, token: Caller, body: RenderBody | None = None) -> dict[str, Any]:
        auth.allow(token, auth.SCOPED_READ, "render VMs")
        get_vm(settings, name, seen_by=auth.seen_by(token))
        return {"vm": name, "xml": applying.render_vm(settings, name, options(body or RenderBody()), None)}

    @app.post("/v1/vms/{name}/apply", summary="vnuma apply")
    def apply(name: str, token: Caller, request: Request, body: ApplyBody | None = None) -> dict[str, Any]:
        given = body or ApplyBody()

        def run() -> dict[str, Any]:
            auth.allow(token, auth.OPERATE, "apply VMs")
            get_vm(settings, name, seen_by=auth.seen_by(token))
            done = applying.apply_vm(settings, name, options(given), None, start=given.start, dry_run=given.dry_run)
            if given.dry_run:
                return {"vm": name, "diff": done.diff}
            return vm_doc(*get_vm(settings, name)) | ({"notes": list(done.notes)} if done.notes else {})

        if given.dry_run:
            return run()
        return change(request, token, {"vm": name, "tenant": auth.seen_by(token)}, run)

    def domain_change(name: str, token: Token, request: Request, act: Callable[[Settings, str], str]) -> Any:
        def run() -> dict[str, Any]:
            auth.allow(token, auth.OPERATE, "start or stop VMs")
            get_vm(settings, name, seen_by=auth.seen_by(token))
            act(settings, name)
            return vm_doc(*get_vm(settings, name))

        return change(request, token, {"vm": name, "tenant": auth.seen_by(token)}, run)

    @app.post("/v1/vms/{name}/start", summary="vnuma vm start")
    def start(name: str, token: Caller, request: Request) -> dict[str, Any]:
        return dict(domain_change(name, token, request, applying.start_vm))

    @app.post("/v1/vms/{name}/stop", summary="vnuma vm stop")
    def stop(name: str, token: Caller, request: Request) -> dict[str, Any]:
        return dict(domain_change(name, token, request, applying.stop_vm))
