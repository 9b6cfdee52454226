"""The rule a health verdict taints by (:func:`vnuma.services.devicehealth.taint_to_give`): never weakens a kept
drain, gives the verdict's reason, and reading the same verdict again changes nothing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vnuma.services.devicehealth import taint_to_give
from vnuma.sources.gpuhealth import GpuVerdict
from vnuma.topology.devstates import NO_DEVICE_STATES, DeviceState, DeviceStateKind, TaintEffect, tainted

ADDRESS = "0000:3b:00.0"
EFFECTS = st.sampled_from([None, TaintEffect.NO_SCHEDULE, TaintEffect.DRAIN])
REASONS = st.sampled_from(["row remapping failed", "GPU has fallen off the bus (Xid 79)", "operator's"])


@given(kept_effect=EFFECTS, kept_reason=REASONS, cleaning=st.booleans(), effect=EFFECTS, reason=REASONS)
def test_a_taint_never_weakens_and_is_given_once(kept_effect: TaintEffect | None, kept_reason: str, cleaning: bool,
                                                 effect: TaintEffect | None, reason: str) -> None:
    states = NO_DEVICE_STATES
    if kept_effect is not None:
        states = tainted(states, ADDRESS, kept_reason, kept_effect, "op", "2026-12-07T00:00:00Z")
    elif cleaning:
        states = states.with_device(DeviceState(ADDRESS, DeviceStateKind.CLEANING, "released by a VM"))
    verdict = GpuVerdict(ADDRESS, effect, reason, ())
    kept = states.of(ADDRESS)
    give = taint_to_give(kept, verdict)
    if effect is None:
        assert give is None
        return
    if give is None:
        assert kept is not None and kept.state is DeviceStateKind.TAINTED and kept.reason == reason
        assert kept.effect is TaintEffect.DRAIN or effect is TaintEffect.NO_SCHEDULE
        return
    if kept_effect is TaintEffect.DRAIN or effect is TaintEffect.DRAIN:
        assert give is TaintEffect.DRAIN
    else:
        assert give is TaintEffect.NO_SCHEDULE
    after = tainted(states, ADDRESS, reason, give, "health", "2026-12-07T00:01:00Z").of(ADDRESS)
    assert taint_to_give(after, verdict) is None
