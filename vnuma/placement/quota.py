"""Tenant quotas (``--max-vcpus``, ``--max-gpus``): the one rule, used before a fit and at admission.

Pure: no I/O. A VM that asks for more of a resource than its tenant may
hold is refused; one that asks for none of it never is (a lowered quota
blocks growth, not VMs that do not use the resource). Every quota refusal
is one :class:`ConflictError` (exit 9) naming the quota that binds (vCPUs
first, then GPUs); its hint differs: a VM that alone is bigger than the
quota (``alone``) can only be made smaller or the quota raised, one that
does not fit on top of what the tenant holds can also wait for a release.

``None`` means unlimited; usage counts the tenant's placed VMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from vnuma.errors import ConflictError
from vnuma.placement.model import Tenant
from vnuma.topology import count_of


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
    """The quota a VM of ``vcpus`` and ``gpus`` would break, if any: one it breaks alone first (no
    release can make room for it), then vCPUs before GPUs."""
    problems: list[QuotaProblem] = []
    for what, limit, now, asked, flag in (
        ("vCPU", tenant.max_vcpus, used.vcpus, vcpus, "--max-vcpus"),
        ("GPU", tenant.max_gpus, used.gpus, gpus, "--max-gpus"),
    ):
        if limit is None or asked <= 0 or now + asked <= limit:
            continue
        raise_it = f"vnuma tenant update {tenant.name} {flag} N"
        if asked > limit:
            problems.append(
                QuotaProblem(
                    f"tenant {tenant.name!r}: the VM asks for {count_of(asked, what)}, more than the quota of {limit}",
                    f"ask for fewer {what}s, or raise the quota: {raise_it}",
                    alone=True,
                )
            )
            continue
        problems.append(
            QuotaProblem(
                f"tenant {tenant.name!r}: {count_of(now, what)} in use + {asked} asked would exceed the quota "
                f"of {limit}",
                f"release one of the tenant's VMs (vnuma vm list --tenant {tenant.name}), or raise the quota: "
                + raise_it,
                alone=False,
            )
        )
    return min(problems, key=lambda p: not p.alone, default=None)


def check_quota(tenant: Tenant, used: Usage, vcpus: int, gpus: int) -> None:
    """Refuse a VM that would take the tenant over its vCPU or GPU quota.

    Raises:
        ConflictError: the VM alone, or the tenant's usage plus the VM, exceeds a quota.
    """
    problem = quota_problem(tenant, used, vcpus, gpus)
    if problem is not None:
        raise ConflictError(problem.message, hint=problem.hint)
