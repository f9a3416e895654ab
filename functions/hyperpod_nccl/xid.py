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

# The driver's kernel lines, from its own format strings (NVIDIA/open-gpu-kernel-modules 595.45.04,
# df1c9a3; facts only). Every shape is tested with a line built from its format
# (tests/unit/test_probe_driver_faults.py).
_BUS = r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?"
# src/nvidia/src/kernel/gpu/rc/kernel_rc.c, XID_PRINT_WITH_ATTR:
#   "NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u[ GPU-CI:%02u]]): %d, [pid=%s, name=%s, ]%s"
# (the GPU-I / GPU-CI attribution when the fault belongs to a MIG instance).
XID_LINE = re.compile(
    rf"NVRM: Xid \((?:PCI:)?(?P<bus>{_BUS})(?: GPU-I:(?P<gpu_instance>\d{{1,3}}))?"
    r"(?: GPU-CI:(?P<compute_instance>\d{1,3}))?\): (?P<code>\d{1,5})"
)
# src/common/nvswitch/kernel/inc/common_nvswitch.h, NVSWITCH_PRINT_SXID:
#   "nvidia-%s: SXid (PCI:%04x:%02x:%02x.%x): %05d, " + the message, which for link and chiplet
#   errors starts "Fatal, " or "Non-fatal, " (kernel/inc/intr_nvswitch.h: "Fatal, Link %02d %s").
SXID_LINE = re.compile(
    rf"nvidia-(?P<switch>[\w-]{{1,32}}): SXid \(PCI:(?P<bus>{_BUS})\): (?P<code>\d{{1,5}})"
    r"(?:, (?P<severity>Fatal|Non-fatal))?(?:, Link (?P<link>\d{1,3}))?"
)
# "GPU has fallen off the bus" printed without an Xid line of its own:
# - src/nvidia/arch/nvalloc/unix/src/osinit.c, NV_DEV_PRINTF: "NVRM: GPU %04x:%02x:%02x.%x: GPU has fallen off the bus."
# - older drivers' one line, "NVRM: GPU at 0000:01:00.0 has fallen off the bus." (a real report, see the test);
FALLEN_OFF_THE_BUS_LINE = re.compile(rf"NVRM: GPU (?:at (?:PCI:)?)?(?P<bus>{_BUS}):? (?:GPU )?has fallen off the bus")
# - src/nvidia/arch/nvalloc/unix/src/osapi.c, one message over three kernel lines:
#   "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x" / "NVRM: (PCI ID: %04x:%04x) installed in this system has" /
#   "NVRM: fallen off the bus and is not responding to commands." Only the first names the GPU. Ending a
#   line with the address, or with "installed in this system has" (reports show other driver releases
#   wrapping the message there), is this message alone: the driver's other "The NVIDIA GPU" messages go
#   on ("... is not supported"). Any of them opens a candidate for the last line, which names no GPU.
FALLEN_OFF_FIRST_LINE = re.compile(
    rf"NVRM: The NVIDIA GPU (?P<bus>{_BUS})"
    r"(?: \(PCI ID: [0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}\) installed in this system has)?\s*$"
)
GPU_MESSAGE_OPENING = re.compile(rf"NVRM: The NVIDIA GPU (?P<bus>{_BUS})")
FALLEN_OFF_LAST_LINE = re.compile(r"NVRM: fallen off the bus and is not responding to commands")
# nverror.h: ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS; the driver logs the same event as Xid 79.
FALLEN_OFF_THE_BUS_XID = 79


def xid_info(code: int) -> XidInfo:
    """The facts for `code`; unknown codes are treated as hardware needing a reboot to be safe."""
    return XID_TABLE.get(code) or XidInfo(code, f"Xid {code}", "unknown", "reboot", "not in the runbook table")


def most_severe_action(codes: list[int]) -> XidAction:
    """The most invasive action any of `codes` calls for ("none" for an empty list)."""
    actions = [xid_info(code).action for code in codes] or ["none"]
    return max(actions, key=ACTION_ORDER.index)
