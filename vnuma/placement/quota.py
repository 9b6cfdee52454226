"""Tenant quotas (``--max-vcpus``, ``--max-gpus``): the one rule, used before a fit and at admission.

Pure: no I/O. A VM that asks for more of a resource than its tenant may
hold is refused; one that asks for none of it never is (a lowered quota
blocks growth, not VMs that do not use the resource). Two different
refusals:

* the VM alone is bigger than the quota (``alone``): it can never be
  placed for this tenant as asked; :func:`check_quota` raises
  :class:`InvalidInputError` (exit 4);
* the VM fits the quota but not on top of what the tenant already holds:
  it can be placed once the tenant releases VMs or the quota is raised;
  :class:`ConflictError` (exit 9).

``None`` means unlimited; usage counts the tenant's placed VMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from vnuma.errors import ConflictError, InvalidInputError
from vnuma.placement.model import Tenant


@dataclass(frozen=True, slots=True)
class Usage:
    """What a tenant's VMs hold, for its quotas."""

    vcpus: int = 0
    gpus: int = 0

    def plus(self, vcpus: int, gpus: int) -> Usage:
        """This usage with a VM of ``vcpus`` and ``gpus`` added (negative counts remove one)."""
        return Usage(self.vcpus + vcpus, self.gpus + gpus)


@dataclass(frozen=True, slots=True)
class QuotaProblem:
    """Why a VM breaks a quota; ``alone``: the VM by itself is over it."""

    message: str
    hint: str
    alone: bool


def quota_problem(tenant: Tenant, used: Usage, vcpus: int, gpus: int) -> QuotaProblem | None:
    """The first quota (vCPUs, then GPUs) a VM of ``vcpus`` and ``gpus`` would break, if any."""
    for what, limit, now, asked, flag in (
        ("vCPUs", tenant.max_vcpus, used.vcpus, vcpus, "--max-vcpus"),
        ("GPUs", tenant.max_gpus, used.gpus, gpus, "--max-gpus"),
    ):
        if limit is None or asked <= 0 or now + asked <= limit:
            continue
        raise_it = f"vnuma tenant update {tenant.name} {flag} N"
        if asked > limit:
            return QuotaProblem(
                f"tenant {tenant.name!r}: the VM asks for {asked} {what}, more than the quota of {limit}",
                f"ask for fewer {what}, or raise the quota: {raise_it}",
                alone=True,
            )
        return QuotaProblem(
            f"tenant {tenant.name!r}: {now} {what} in use + {asked} asked would exceed the quota of {limit}",
            f"release one of the tenant's VMs (vnuma vm list --tenant {tenant.name}), or raise the quota: "
            + raise_it,
            alone=False,
        )
    return None


def check_quota(tenant: Tenant, used: Usage, vcpus: int, gpus: int) -> None:
    """Refuse a VM that would take the tenant over its vCPU or GPU quota.

    Raises:
        InvalidInputError: the VM alone exceeds a quota.
        ConflictError: the tenant's usage plus the VM exceeds a quota.
    """
    problem = quota_problem(tenant, used, vcpus, gpus)
    if problem is None:
        return
    error = InvalidInputError if problem.alone else ConflictError
    raise error(problem.message, hint=problem.hint)
