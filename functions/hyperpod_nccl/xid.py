"""NVIDIA Xid facts: the single source for every module that sees an Xid (node probes, logs).

Each code maps to a short name, whether it is an application, hardware or driver/firmware
fault, and the action of the triage table in node-debugger.md § G. NVIDIA's Xid catalog for the
GPU generation and driver is authoritative; this table is the runbook's summary of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

XidCategory = Literal["app", "hardware", "driver", "follow-on", "unknown"]
# Ordered from least to most invasive: `most_severe_action` relies on this order.
XidAction = Literal["none", "restart-app", "reset-gpu", "reboot", "replace"]
ACTION_ORDER: tuple[XidAction, ...] = ("none", "restart-app", "reset-gpu", "reboot", "replace")


@dataclass(frozen=True)
class XidInfo:
    """What one Xid code means and what to do about it (node-debugger.md § G)."""

    code: int
    name: str
    category: XidCategory
    action: XidAction
    note: str = ""

    @property
    def is_hardware(self) -> bool:
        """Hardware (or driver/firmware) faults that need the node, not the job, fixed."""
        return self.category in ("hardware", "driver")


XID_TABLE: dict[int, XidInfo] = {
    info.code: info
    for info in (
        XidInfo(13, "graphics engine exception", "app", "restart-app", "hardware only if it follows the GPU"),
        XidInfo(31, "GPU memory page fault", "app", "restart-app", "DCGM diag if it repeats on one GPU"),
        XidInfo(43, "GPU stopped processing", "app", "none", "follows an application fault"),
        XidInfo(45, "preemptive cleanup after earlier errors", "follow-on", "none", "read the Xid before it"),
        XidInfo(48, "double-bit ECC error", "hardware", "reboot", "replace if it recurs; check row remap"),
        XidInfo(61, "internal micro-controller breakpoint", "hardware", "reboot", "replace if it recurs"),
        XidInfo(62, "internal micro-controller halt", "hardware", "reboot", "replace if it recurs"),
        XidInfo(63, "ECC page retirement / row remap recorded", "hardware", "reboot", "reboot applies the remap"),
        XidInfo(64, "ECC page retirement / row remap failed", "hardware", "replace"),
        XidInfo(74, "NVLink error", "hardware", "reboot", "replace if it recurs"),
        XidInfo(79, "GPU has fallen off the bus", "hardware", "replace", "a reboot may hide it temporarily"),
        XidInfo(92, "high single-bit ECC error rate", "hardware", "none", "watch; plan replacement if rising"),
        XidInfo(94, "contained ECC error", "hardware", "restart-app", "reboot to apply pending remaps"),
        XidInfo(95, "uncontained ECC error", "hardware", "reboot", "replace if it recurs"),
        XidInfo(109, "context-switch timeout", "app", "restart-app", "hardware if it repeats on one GPU"),
        XidInfo(119, "GSP RPC timeout", "driver", "reboot", "replace or update the driver if it recurs"),
        XidInfo(120, "GSP error", "driver", "reboot", "replace or update the driver if it recurs"),
        XidInfo(154, "GPU recovery action changed", "driver", "reboot", "follow the action the message names"),
    )
}

# "NVRM: Xid (PCI:0000:53:00): 79, pid=..., GPU has fallen off the bus."
XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+)")


def xid_info(code: int) -> XidInfo:
    """The facts for `code`; unknown codes are treated as hardware needing a reboot to be safe."""
    return XID_TABLE.get(code) or XidInfo(code, f"Xid {code}", "unknown", "reboot", "not in the runbook table")


def most_severe_action(codes: list[int]) -> XidAction:
    """The most invasive action any of `codes` calls for ("none" for an empty list)."""
    actions = [xid_info(code).action for code in codes] or ["none"]
    return max(actions, key=ACTION_ORDER.index)
