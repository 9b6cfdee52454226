"""Tenant quotas (``--max-vcpus``, ``--max-gpus``): checked after a fit, before a claim.

Pure: no I/O. Two different refusals:

* the VM alone is bigger than the quota: :class:`InvalidInputError` (exit 4),
  it can never be placed for this tenant as asked;
* the VM fits the quota but not on top of what the tenant already runs:
  :class:`ConflictError` (exit 9), it can be placed once the tenant
  releases VMs (or the quota is raised).

``None`` means unlimited; usage counts the tenant's placed VMs.
"""

from __future__ import annotations

from vnuma.errors import ConflictError, InvalidInputError
from vnuma.placement.model import Tenant


def _check(tenant: str, what: str, limit: int | None, used: int, asked: int) -> None:
    if limit is None or used + asked <= limit:
        return
    if asked > limit:
        raise InvalidInputError(
            f"tenant {tenant!r}: the VM asks for {asked} {what}, more than the quota of {limit}",
            hint=f"ask for fewer {what}, or raise the tenant's quota",
        )
    raise ConflictError(
        f"tenant {tenant!r}: {used} {what} in use + {asked} asked would exceed the quota of {limit}",
        hint="release one of the tenant's VMs (vnuma vm list --tenant " + tenant + "), or raise the quota",
    )


def check_quota(
    tenant: Tenant, usage_vcpus: int, usage_gpus: int, request_vcpus: int, request_gpus: int
) -> None:
    """Refuse a VM that would take the tenant over its vCPU or GPU quota.

    Raises:
        InvalidInputError: the VM alone exceeds a quota.
        ConflictError: the tenant's usage plus the VM exceeds a quota.
    """
    _check(tenant.name, "vCPUs", tenant.max_vcpus, usage_vcpus, request_vcpus)
    _check(tenant.name, "GPUs", tenant.max_gpus, usage_gpus, request_gpus)
