"""What moved and what fell back: the transfer counter and the CPU-fallback
report, so a user or a test can see every host<->device copy."""
from .. import _C


def transfer_stats() -> dict:
    """{direction: {cause: {"count": n, "bytes": b}}} since the last reset.

    Directions: host_to_device, device_to_host, device_to_device.
    Causes: copy (explicit .to()/copy_()/.item()), cpu_fallback (an op run on
    the CPU with copies), kernel_output (a kernel result copied in)."""
    return _C._transfer_stats()


def reset_transfer_stats() -> None:
    _C._reset_transfer_stats()


def total_transfers(stats: dict | None = None) -> tuple[int, int]:
    """(count, bytes) over every direction and cause."""
    stats = stats if stats is not None else transfer_stats()
    count = sum(c["count"] for by_cause in stats.values() for c in by_cause.values())
    nbytes = sum(c["bytes"] for by_cause in stats.values() for c in by_cause.values())
    return count, nbytes


def fallback_report() -> list[dict]:
    """Ops that ran on the CPU with copies: [{"op", "calls", "seconds"}]."""
    return _C._fallback_report()


def reset_fallback_report() -> None:
    _C._reset_fallback_report()


def eager_kernel_report() -> list[dict]:
    """Ops that ran as device kernels the compiler made for them (drivers
    whose memory the host cannot address): [{"op", "launches", "kernels",
    "builds", "declined"}]; kernels counts distinct kernels (one per op,
    dtypes, rank and layout class, never per shape), builds those not found
    in the persistent kernel cache, declined why the op's last call without a
    kernel fell back ("" if none did)."""
    return _C._eager_kernel_report()


def reset_eager_kernel_report() -> None:
    _C._reset_eager_kernel_report()


def set_eager_fusion(enabled: bool) -> None:
    """Turns Adaptive Eager Execution on or off for the process (held calls
    run first). Off: every eager op runs alone, bitwise as without fusion."""
    _C._set_eager_fusion(bool(enabled))


def is_eager_fusion_enabled() -> bool:
    return _C._eager_fusion_enabled()


def eager_fusion_stats() -> dict:
    """Counts since the last reset: calls held, chains run, fused kernels
    (chains of two or more calls run as one kernel), the calls in them,
    unfused chains (fusion declined: ran call by call), chains run call by
    call because their kernel was not built yet (awaiting_build: on host it
    builds in the background once a chain repeats) and
    results never written because nobody held them."""
    return _C._eager_fusion_stats()


def reset_eager_fusion_stats() -> None:
    _C._reset_eager_fusion_stats()


def wait_for_eager_fusion_builds() -> None:
    """Waits until the fused-chain kernels building in the background (on
    host: chains run unfused meanwhile) are built; for benchmarks that must
    time the fused steady state."""
    _C._wait_for_eager_fusion_builds()


def format_fallback_report() -> str:
    rows = sorted(fallback_report(), key=lambda r: -r["seconds"])
    if not rows:
        return "No op fell back to the CPU."
    lines = [f"{'op':<48} {'calls':>8} {'seconds':>10}"]
    lines += [f"{r['op']:<48} {r['calls']:>8} {r['seconds']:>10.4f}" for r in rows]
    return "\n".join(lines)


def set_fallback_policy(policy: str) -> None:
    """'warn' (once per op), 'error' or 'silent'; OPENNEURON_CPU_FALLBACK sets the default."""
    _C._set_fallback_policy(policy)


def fallback_policy() -> str:
    return _C._fallback_policy()
