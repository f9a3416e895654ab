"""Turn the sectioned output of the probe scripts into pydantic models.

Parsers are lenient: a section that is missing, cut off or unparsable leaves its field None
or empty, so a partial output (budget expired mid-probe) still yields what it contains.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hyperpod_nccl import thresholds
from hyperpod_nccl.bounded import loads_json
from hyperpod_nccl.hang.flight_recorder import rank_from_filename
from hyperpod_nccl.models.node_probe import (
    AVAILABILITY_ZONE_ID_PATTERN,
    AVAILABILITY_ZONE_PATTERN,
    EC2_INSTANCE_TYPE_PATTERN,
    FI_INFO_DOMAIN_PATTERN,
    FI_INFO_PROVIDER_PATTERN,
    FI_INFO_TYPE_PATTERN,
    FI_INFO_VERSION_PATTERN,
    FiInfoEfaEntry,
    FlightRecorderFile,
    GpuNicAffinity,
    HostIdentity,
    LoopbackLatency,
    NcclJobChoice,
    NcclJobProcess,
    NetInterface,
    NodeProbeData,
    NvlinkGpu,
    ProcessLimits,
    SectionStatus,
    SlurmControllerData,
    SlurmctldState,
    SlurmNodeState,
    SlurmQueueEntry,
    SXidEvent,
    Versions,
    XidEvent,
    canonical_pci_bus_id,
)
from hyperpod_nccl.probe.nvidia_smi_xml import GpuReport, parse_gpu_report
from hyperpod_nccl.probe.sections import BEGIN_MARKER, END_MARKER, NodeSection, SlurmSection
from hyperpod_nccl.redaction import scrub
from hyperpod_nccl.xid import (
    FALLEN_OFF_FIRST_LINE,
    FALLEN_OFF_LAST_LINE,
    FALLEN_OFF_THE_BUS_LINE,
    FALLEN_OFF_THE_BUS_XID,
    GPU_MESSAGE_OPENING,
    SXID_LINE,
    XID_LINE,
)

_BEGIN = re.compile(rf"^{BEGIN_MARKER} (?P<name>[a-z0-9_]+)$")
_END = re.compile(rf"^{END_MARKER} (?P<name>[a-z0-9_]+) rc=(?P<rc>-?\d*)$")
NOT_FOUND_RC = 127
_MISSING = ("command not found", "No such file or directory", "not found")


@dataclass
class Section:
    """The output lines of one section and its exit status (None when the end was cut off)."""

    name: str
    lines: list[str]
    rc: int | None

    @property
    def text(self) -> str:
        """The output as one string."""
        return "\n".join(self.lines)

    @property
    def tool_missing(self) -> bool:
        """The section's command is not installed (exit 127)."""
        return self.rc == NOT_FOUND_RC


def split_sections(output: str) -> dict[str, Section]:
    """Split probe output into sections by their markers (text outside sections is ignored),
    secrets redacted (`redaction.scrub`) in every section but the Flight Recorder's payload."""
    sections: dict[str, Section] = {}
    current: Section | None = None
    for raw in output.replace("\r\n", "\n").split("\n"):
        line = raw.rstrip("\r")
        begin = _BEGIN.match(line)
        if begin:
            current = Section(begin.group("name"), [], None)
            sections[current.name] = current
            continue
        end = _END.match(line)
        if end and current is not None and end.group("name") == current.name:
            rc = end.group("rc")
            current.rc = int(rc) if rc else None
            current = None
            continue
        if current is not None and line:
            current.lines.append(line)
    for section in sections.values():
        _redact(section)
    return sections


# Sections whose lines are data, not text: the Flight Recorder's base64 dumps, which the
# opaque-string rule would destroy (their `file …` lines are still scrubbed).
_PAYLOAD_SECTIONS = frozenset({NodeSection.FLIGHT_RECORDER})


def _redact(section: Section) -> None:
    """Secrets out of a section as it is made (job env, nvvs logs, Slurm reasons, dmesg...): the
    node's output is the job's and the node's, so nothing parsed from it may carry one."""
    if section.name in _PAYLOAD_SECTIONS:
        section.lines = [line if _BASE64.match(line.strip()) else scrub(line) for line in section.lines]
    elif section.lines:
        section.lines = scrub("\n".join(section.lines)).split("\n")


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    return int(value) if re.fullmatch(r"-?\d+", value) else None


def _first(lines: list[str]) -> str | None:
    return lines[0].strip() if lines else None


def _ok_lines(section: Section | None) -> list[str]:
    """Lines of a section that ran, without tool-missing noise."""
    if section is None or section.tool_missing:
        return []
    return [line for line in section.lines if not any(marker in line for marker in _MISSING)]


# `uniq -c`'s lines: the count, one space, the counted text.
_COUNTED_LINE = re.compile(r"^\s{0,12}(?P<count>\d{1,9}) (?P<text>.+)$")
# Distinct faults kept per node: GPUs x codes and switches x codes stay far below it.
MAX_DRIVER_FAULTS = 256
_UNKNOWN_GPU = "unknown GPU"
# A fault: ("xid", bus, GPU instance, compute instance, code) or ("sxid", switch, bus, code, fatal).
_FaultKey = tuple[Any, ...]


# Which print of one event is shown as its evidence, most telling first.
_SHAPE_RANK = {"xid": 0, "sxid": 0, "fallen_first": 1, "fallen": 2, "fallen_last": 3}


@dataclass
class _Fault:
    count: int = 0
    line: str = ""
    links: set[int] = field(default_factory=set)


def _driver_fault(text: str) -> tuple[_FaultKey, str, str, int | None] | None:
    """(fault, shape, the line from the driver's prefix on, link) of one kernel line, or None.

    `shape` tells apart the driver's prints of one event (an Xid 79 line and the "GPU has fallen off
    the bus" line beside it are one fall, not two)."""
    match = XID_LINE.search(text)
    if match:
        instance, compute = match.group("gpu_instance"), match.group("compute_instance")
        key: _FaultKey = (
            "xid",
            canonical_pci_bus_id(match.group("bus")),
            int(instance) if instance else None,
            int(compute) if compute else None,
            int(match.group("code")),
        )
        return key, "xid", text[match.start() :], None
    match = SXID_LINE.search(text)
    if match:
        severity, link = match.group("severity"), match.group("link")
        fatal = None if severity is None else severity == "Fatal"
        key = ("sxid", match.group("switch"), canonical_pci_bus_id(match.group("bus")), int(match.group("code")), fatal)
        return key, "sxid", text[match.start() :], int(link) if link else None
    for shape, pattern in (("fallen", FALLEN_OFF_THE_BUS_LINE), ("fallen_first", FALLEN_OFF_FIRST_LINE)):
        match = pattern.search(text)
        if match:
            key = ("xid", canonical_pci_bus_id(match.group("bus")), None, None, FALLEN_OFF_THE_BUS_XID)
            return key, shape, text[match.start() :].rstrip(), None
    return None


def _tally_driver_faults(lines: list[str], *, counted: bool) -> dict[tuple[_FaultKey, str], _Fault]:
    """Each (fault, shape) of one source: how often it was printed and its last line."""
    tally: dict[tuple[_FaultKey, str], _Fault] = {}
    since_first_line = 99  # lines since the last "The NVIDIA GPU <bus>" (the three-line message)
    opened: _Fault | None = None  # the fault that line opened, when its shape was certain
    candidate: tuple[str, str] | None = None  # else that line's GPU and text
    for raw in lines:
        count, text = 1, raw
        if counted:
            found = _COUNTED_LINE.match(raw)
            if found is None:
                continue
            count, text = int(found.group("count")), found.group("text")
        since_first_line += 1
        parsed = _driver_fault(text)
        if parsed is None:
            opening = GPU_MESSAGE_OPENING.search(text)
            if opening is not None:
                since_first_line, opened = 0, None
                candidate = (canonical_pci_bus_id(opening.group("bus")), text[opening.start() :].strip())
                continue
            last = FALLEN_OFF_LAST_LINE.search(text)
            if last is None:
                continue
            ending = text[last.start() :].strip()
            if since_first_line <= 2 and opened is not None:
                opened.line = f"{opened.line} ... {ending}"[:300]
                continue
            if since_first_line <= 2 and candidate is not None:
                bus, first = candidate
                parsed = (
                    ("xid", bus, None, None, FALLEN_OFF_THE_BUS_XID),
                    "fallen_first",
                    f"{first} ... {ending}",
                    None,
                )
            else:
                # the message's first line, the one naming the GPU, was cut away: still a fall
                parsed = (("xid", _UNKNOWN_GPU, None, None, FALLEN_OFF_THE_BUS_XID), "fallen_last", ending, None)
        key, shape, line, link = parsed
        fault = tally.get((key, shape))
        if fault is None:
            if len(tally) >= MAX_DRIVER_FAULTS:
                continue
            fault = tally[(key, shape)] = _Fault()
        fault.count += count
        if not counted or not fault.line:
            fault.line = line[:300]
        if shape == "fallen_first":
            since_first_line, opened, candidate = 0, fault, None
        if link is not None and len(fault.links) < 64:
            fault.links.add(link)
    return tally


def parse_driver_faults(
    log_sources: Sequence[list[str]], counted_sources: Sequence[list[str]] = ()
) -> tuple[list[XidEvent], list[SXidEvent]]:
    """The GPU driver's Xid and the NVSwitch driver's SXid faults of a node, one event per GPU (or
    MIG instance, or switch) and code, with how often each was printed.

    `log_sources` are kernel log lines (dmesg, the journal), `counted_sources` the same sources'
    fault lines counted by `uniq -c` over the whole window (so a storm of one code in the lines'
    tail cannot hide another). One event printed in several shapes or sources counts once: the
    count is the highest any shape or source saw, never their sum (dmesg and the journal hold the
    same events)."""
    best: dict[_FaultKey, _Fault] = {}
    # The line shown: a whole kernel line before a counted key, and the Xid line before the other prints.
    shown: dict[_FaultKey, tuple[int, int]] = {}
    sources = [(lines, False) for lines in log_sources] + [(lines, True) for lines in counted_sources]
    for lines, counted in sources:
        for (key, shape), fault in _tally_driver_faults(lines, counted=counted).items():
            merged = best.setdefault(key, _Fault())
            merged.count = max(merged.count, fault.count)
            rank = (int(counted), _SHAPE_RANK.get(shape, len(_SHAPE_RANK)))
            if fault.line and (key not in shown or rank < shown[key]):
                merged.line, shown[key] = fault.line, rank
            merged.links |= fault.links
    falls = [k for k in best if k[0] == "xid" and k[4] == FALLEN_OFF_THE_BUS_XID and k[1] != _UNKNOWN_GPU]
    if falls:  # the GPU a cut message named is known from another line
        best.pop(("xid", _UNKNOWN_GPU, None, None, FALLEN_OFF_THE_BUS_XID), None)
    xids = [
        XidEvent(bus_id=k[1], code=k[4], gpu_instance=k[2], compute_instance=k[3], count=f.count, line=f.line)
        for k, f in best.items()
        if k[0] == "xid"
    ]
    sxids = [
        SXidEvent(switch=k[1], bus_id=k[2], code=k[3], fatal=k[4], count=f.count, line=f.line, links=sorted(f.links))
        for k, f in best.items()
        if k[0] == "sxid"
    ]
    return xids, sxids


def _walk_strings(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk_strings(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk_strings(value, f"{path}/{index}")
    elif isinstance(node, str):
        yield path, node


def parse_dcgm_health(text: str) -> tuple[str | None, list[str]]:
    """Overall health and the incident messages of `dcgmi health --check` (JSON or table)."""
    if not text.strip() or text.lstrip().startswith("Error"):
        return None, []
    overall: str | None = None
    incidents: list[str] = []
    try:
        # Bounded in size and depth (UnreadableData is a ValueError): the node wrote this text.
        document = loads_json(text, max_bytes=thresholds.DCGM_HEALTH_MAX_BYTES)
    except ValueError:
        match = re.search(r"Overall Health\s*[|:]\s*(\w+)", text)
        overall = match.group(1) if match else None
        incidents = [
            line.strip(" |") for line in text.splitlines() if re.search(r"\b(Fail|Warn|Warning)\b", line, re.I)
        ]
        return overall, incidents[:20]
    incidents = _dcgm_incidents(document)
    for path, value in _walk_strings(document):
        if path.lower().endswith("overall health/value") and overall is None:
            overall = value
        elif not incidents and ("message" in path.lower().rsplit("/", 1)[-1] or "/error" in path.lower()):
            incidents.append(value)
    return overall, incidents[:20]


def _children(node: Any) -> dict[str, Any]:
    children = node.get("children") if isinstance(node, dict) else None
    return children if isinstance(children, dict) else {}


def _dcgm_incidents(document: Any) -> list[str]:
    """One line per entity and watched system of `dcgmi health --check -j`, as dcgmi builds it
    (NVIDIA/DCGM dcgmi/Health.cpp, Health::HandleOneEntity, and dcgmi/DcgmiOutput.h at 72fa3fea):
    body → entity group ("GPU", "Switch" ...) → children by entity id → children "Errors" → children
    by system ("Memory system") with the system's health as `value` and its messages cut into
    `overflow` pieces of at most 54 characters, joined back here. Empty when the document has
    no such tree (an older layout is then read by its strings)."""
    body = document.get("body") if isinstance(document, dict) else None
    if not isinstance(body, dict):
        return []
    lines = []
    for group, node in body.items():
        for entity, entity_node in _children(node).items():
            for system, system_node in _children(_children(entity_node).get("Errors")).items():
                health = system_node.get("value", "") if isinstance(system_node, dict) else ""
                pieces = system_node.get("overflow", []) if isinstance(system_node, dict) else []
                message = " ".join(p for p in pieces if isinstance(p, str)) if isinstance(pieces, list) else ""
                lines.append(f"{group} {entity}: {system} {health}: {message}".strip()[:500])
    return lines


# When every link of a GPU is down, nvidia-smi prints NVML's message instead of the link list
# ("NVML: Unable to retrieve NVLink information as all links are inActive").
_ALL_LINKS_INACTIVE = re.compile(r"all links are inactive", re.I)


def nvlink_totals(gpus: list[NvlinkGpu]) -> tuple[int, list[str]]:
    """(active links, down link lines) over every GPU: a GPU whose links are all down is one entry
    carrying NVML's message."""
    return sum(len(g.speeds_gbps) for g in gpus), [line for g in gpus for line in g.down_lines]


# One `Link N: <state>` line; the state is a speed (`26.562 GB/s`) or a word in angle brackets.
_NVLINK_LINE = re.compile(r"^Link (?P<link>\d{1,3}): (?P<state>.{1,80})$")
_NVLINK_SPEED = re.compile(r"^(?P<speed>\d{1,4}(?:\.\d{1,6})?) GB/s$")
_NVLINK_DOWN = re.compile(r"inactive|down|error|fail", re.I)
_NVLINK_MAX_GPUS = 64
_NVLINK_MAX_NOT_UNDERSTOOD = 16


def parse_nvlink_gpus(lines: list[str]) -> list[NvlinkGpu]:
    """Per GPU of `nvidia-smi nvlink --status`: the speed of each active link, the links down
    (NVML's all-links-inactive message counts as one), and link lines whose state is neither a speed
    nor a down word, kept (bounded) as not understood rather than dropped."""
    gpus: list[NvlinkGpu] = []
    for line in lines[: _NVLINK_MAX_GPUS * 40]:
        stripped = line.strip()
        header = re.match(r"^(?P<gpu>GPU \d{1,3}):", stripped)
        if header:
            if len(gpus) >= _NVLINK_MAX_GPUS:
                break
            gpus.append(NvlinkGpu(gpu=header["gpu"]))
            continue
        if not gpus:
            continue
        current = gpus[-1]
        row = _NVLINK_LINE.match(stripped)
        if row:
            speed = _NVLINK_SPEED.match(row["state"].strip())
            if speed:
                current.speeds_gbps.append(float(speed["speed"]))
            elif _NVLINK_DOWN.search(row["state"]):
                current.down_lines.append(f"{current.gpu} {stripped}")
            elif len(current.not_understood) < _NVLINK_MAX_NOT_UNDERSTOOD:
                current.not_understood.append(stripped[:120])
        elif _ALL_LINKS_INACTIVE.search(stripped):
            current.down_lines.append(f"{current.gpu} {stripped[:200]}")
    return gpus


def parse_topology(lines: list[str]) -> tuple[int | None, int | None]:
    """(GPU pairs over NVLink, GPU pairs over PCIe/host bridges) of `nvidia-smi topo -m`."""
    if not lines:
        return None, None
    header = next((line.split() for line in lines if line.strip().startswith("GPU0")), None)
    if header is None:
        return None, None
    gpu_columns = [i for i, name in enumerate(header) if re.fullmatch(r"GPU\d+", name)]
    nvlink = pcie = 0
    for line in lines:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]) or cells == header:
            continue
        values = cells[1:]
        for column in gpu_columns:
            if column >= len(values):
                continue
            cell = values[column]
            if cell.startswith("NV"):
                nvlink += 1
            elif cell in ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC"):
                pcie += 1
    return nvlink, pcie


# Bounds of the matrix read: 8 GPUs and 32 EFA NICs on the largest AWS types; far more is not a
# matrix nvidia-smi printed for one host.
_TOPO_MAX_GPUS = 64
_TOPO_MAX_NICS = 128
# The matrix legend's PCIe path kinds, nearest first. SOC is the older name of SYS (drivers before
# 384 printed it for the path across the CPU sockets' interconnect).
_NIC_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")
_NIC_PATH_ALIASES = {"SOC": "SYS"}


def parse_gpu_nic_affinity(lines: list[str]) -> list[GpuNicAffinity]:
    """Per GPU row of `nvidia-smi topo -m`, its nearest NIC column(s) and their path kind. A row
    whose NIC cells are not all legend values is skipped (node output is untrusted); no NIC columns
    (a host whose NICs nvidia-smi does not list) gives an empty list."""
    header = next((line.split() for line in lines[:200] if line.strip().startswith("GPU0")), None)
    if header is None:
        return []
    # Header cells are column names; the row's first cell is the GPU, so row cell i+1 is column i.
    nic_columns = [i for i, name in enumerate(header) if re.fullmatch(r"NIC\d{1,3}", name)][:_TOPO_MAX_NICS]
    if not nic_columns:
        return []
    found: list[GpuNicAffinity] = []
    for line in lines[:200]:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d{1,3}", cells[0]) or cells == header:
            continue
        values = cells[1:]
        if len(values) <= nic_columns[-1]:
            continue  # a cut-off row
        paths = [_NIC_PATH_ALIASES.get(values[i], values[i]) for i in nic_columns]
        if not all(path in _NIC_PATHS for path in paths):
            continue
        nearest = min(paths, key=_NIC_PATHS.index)
        nics = [header[i] for i, path in zip(nic_columns, paths, strict=True) if path == nearest]
        found.append(GpuNicAffinity(gpu=cells[0], nics=nics, link=nearest))
        if len(found) >= _TOPO_MAX_GPUS:
            break
    return found


def parse_acs(lines: list[str]) -> list[str]:
    """PCI devices whose ACS control has source validation on (`ACSCtl: SrcValid+`)."""
    enabled, device = [], ""
    for line in lines:
        if re.match(r"^[0-9a-f]{2,4}:", line):
            device = line.strip()
        elif "ACSCtl:" in line and "SrcValid+" in line and device:
            enabled.append(device[:120])
    return enabled


def parse_interfaces(addr_lines: list[str], link_lines: list[str]) -> list[NetInterface]:
    """`ip -br addr` rows joined with the MTU of `ip -o link`."""
    mtus: dict[str, int] = {}
    for line in link_lines:
        match = re.match(r"^\d+:\s+([^:@\s]++)(?:@[^\s:]*+)?:.*\bmtu (\d+)", line)
        if match:
            mtus[match.group(1)] = int(match.group(2))
    interfaces = []
    for line in addr_lines:
        fields = line.split()
        if len(fields) < 2 or fields[0].endswith(":"):
            continue
        name = fields[0].split("@", 1)[0]
        interfaces.append(NetInterface(name=name, state=fields[1], addresses=fields[2:], mtu=mtus.get(name)))
    return interfaces


# df's unit letters are 1024-based; `df -h` rounds up, so "64M" is at most 64 MiB.
_DF_UNITS = "KMGTPE"
_DF_HUMAN_SIZE = re.compile(r"^(?P<number>\d+(?:\.\d+)?)(?P<unit>[KMGTPE])$")
_DF_BLOCKS_HEADER = re.compile(r"^1(?P<unit>[KMGTPE]?)B?-blocks$")


def _df_unit_bytes(unit: str) -> int:
    return 1024 ** (_DF_UNITS.index(unit) + 1) if unit else 1


def _df_human_bytes(value: str) -> int | None:
    match = _DF_HUMAN_SIZE.match(value)
    return int(float(match["number"]) * _df_unit_bytes(match["unit"])) if match else None


def parse_shm(lines: list[str]) -> tuple[str | None, int | None, str | None]:
    """(fs type, size in bytes, mount point) of `df -B1 --output=fstype,size,avail,target /dev/shm`.

    df prints the filesystem that holds the path: where /dev/shm is no mount of its own (a container
    without one, a host whose /dev/shm is a directory of the root filesystem or a link into /run),
    that is another mount, whose size is then what /dev/shm has; the mount point tells them apart.
    df's default layout (`Filesystem Size Used Avail Use% Mounted on`, `df -h` as people paste
    it) is read too: its first column is the mount source, not the type, so the type is None, and
    a plain number counts the blocks its header names (`1K-blocks`, the default, or `1B-blocks`)."""
    block = 1024
    for line in lines:
        fields = line.split()
        if fields[:1] == ["Filesystem"] and len(fields) > 1 and (header := _DF_BLOCKS_HEADER.match(fields[1])):
            block = _df_unit_bytes(header["unit"])
        if len(fields) < 4 or not fields[-1].startswith("/"):
            continue
        mount = fields[-1]
        if len(fields) >= 6 and fields[-2].endswith("%"):
            blocks = _int(fields[1])
            return None, blocks * block if blocks is not None else _df_human_bytes(fields[1]), mount
        if _int(fields[1]) is not None:
            return fields[0], _int(fields[1]), mount
    return None, None, None


def parse_firewall(iptables: Section | None, nft: Section | None) -> list[str]:
    """DROP/REJECT rules of the host firewall: iptables' when it is installed, else nftables' (the
    original's nft fallback). Where iptables runs on the nft backend both show the same rules, so
    nft is read only in iptables' absence."""
    if iptables is not None and not iptables.tool_missing:
        return _ok_lines(iptables)[:20]
    return [line.strip() for line in _ok_lines(nft)][:20]


def _limit(lines: list[str]) -> tuple[int | None, bool]:
    value = lines[0].strip() if lines else ""
    if value == "unlimited":
        return None, True
    return _int(value), False


def parse_fi_info(section: Section | None) -> tuple[int | None, str | None]:
    """(distinct EFA RDM domains, error) of `fi_info -p efa -t FI_EP_RDM | grep ...`."""
    if section is None:
        return None, "fi_info section missing"
    if section.tool_missing:
        return None, "fi_info not installed"
    domains = set()
    provider = ""
    for line in section.lines:
        stripped = line.strip()
        if stripped.startswith("provider:"):
            provider = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("domain:") and provider.split(";")[0] == "efa":
            domains.add(stripped.split(":", 1)[1].strip().removesuffix("-rdm").removesuffix("-dgrm"))
    error = None if domains else (section.text.strip()[:200] or f"no efa provider (rc={section.rc})")
    return len(domains), error


# Bound of the entries kept: a p5en lists 16 EFA devices (one RDM entry each); far more is no fi_info.
MAX_FI_INFO_ENTRIES = 64
_FI_INFO_FIELDS = {
    "provider": FI_INFO_PROVIDER_PATTERN,
    "domain": FI_INFO_DOMAIN_PATTERN,
    "version": FI_INFO_VERSION_PATTERN,
    "type": FI_INFO_TYPE_PATTERN,
}


def parse_fi_info_entries(section: Section | None) -> list[FiInfoEfaEntry]:
    """The entries of `fi_info -p efa -t FI_EP_RDM | grep ...` (a `provider:` line opens each, its
    `domain:`, `version:` and `type:` lines follow), at most MAX_FI_INFO_ENTRIES. A value not of its
    shape (the node's output is untrusted) is dropped: an entry without a provider and a domain of
    their shapes is not kept, a version or type not of its shape is None."""
    if section is None or section.tool_missing:
        return []
    entries: list[FiInfoEfaEntry] = []
    fields: dict[str, str] = {}

    def close() -> None:
        if "provider" in fields and "domain" in fields and len(entries) < MAX_FI_INFO_ENTRIES:
            entries.append(
                FiInfoEfaEntry(
                    provider=fields["provider"],
                    domain=fields["domain"],
                    version=fields.get("version"),
                    endpoint_type=fields.get("type"),
                )
            )

    for line in section.lines:
        name, colon, value = line.strip().partition(":")
        if not colon or name not in _FI_INFO_FIELDS:
            continue
        if name == "provider":
            close()
            fields = {}
        value = value.strip()
        if re.fullmatch(_FI_INFO_FIELDS[name], value):
            fields.setdefault(name, value)
    close()
    return entries


def _version_from(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text, re.M)
    return match.group(1) if match else None


def parse_versions(sections: dict[str, Section], gpu_report: GpuReport) -> Versions:
    """Versions of the driver, CUDA, NCCL, aws-ofi-nccl, libfabric, the EFA installer and kernel."""

    def text(name: str) -> str:
        return "\n".join(_ok_lines(sections.get(name)))

    nccl_libs = sorted(
        (
            tuple(int(p) for p in m.groups())
            for m in re.finditer(r"libnccl\.so\.(\d+)\.(\d+)\.(\d+)", text(NodeSection.NCCL_LIBS))
        ),
        reverse=True,
    )
    nccl = ".".join(str(p) for p in nccl_libs[0]) if nccl_libs else None
    if nccl is None:
        header = dict(re.findall(r"#define NCCL_(MAJOR|MINOR|PATCH) (\d+)", text(NodeSection.NCCL_HEADER)))
        if len(header) == 3:
            nccl = f"{header['MAJOR']}.{header['MINOR']}.{header['PATCH']}"
    installer = text(NodeSection.EFA_INSTALLER)
    ofi = text(NodeSection.OFI_NCCL)
    kernel = _ok_lines(sections.get(NodeSection.KERNEL))
    return Versions(
        driver=_version_from(r"^(\d{1,4}(?:\.\d{1,4}){1,3})$", gpu_report.driver_version or ""),
        # A number, or nothing: nvidia-smi says "Not Found" where no CUDA driver API is there.
        cuda=_version_from(r"^(\d{1,3}\.\d{1,3}(?:\.\d{1,3})?)$", gpu_report.cuda_version or ""),
        nccl=nccl,
        ofi_nccl=_version_from(r"(?:aws-ofi-nccl|libnccl-ofi|nccl-ofi)[-_ ]?v?(\d+\.\d+\.\d+)", installer + "\n" + ofi),
        libfabric=_version_from(r"^libfabric:\s*(\S+)", text(NodeSection.FI_INFO_VERSION)),
        efa_installer=_version_from(r"EFA installer version:\s*(\S+)", installer),
        kernel=kernel[0].strip() if kernel else None,
        efa_module=_first(_ok_lines(sections.get(NodeSection.EFA_MODULE_VERSION))),
    )


def parse_efa_counters(lines: list[str]) -> dict[str, dict[str, int]]:
    """`/sys/class/infiniband/<dev>/ports/1/hw_counters/<name>:<value>` lines by device."""
    counters: dict[str, dict[str, int]] = {}
    for line in lines:
        match = re.match(r"^/sys/class/infiniband/([^/]+)/ports/\d+/hw_counters/([a-z_]+):(\d+)$", line.strip())
        if match:
            counters.setdefault(match.group(1), {})[match.group(2)] = int(match.group(3))
    return counters


_PINGPONG_ROW = re.compile(
    r"^(?P<size>\d+(?:\.\d+)?[kmg]?)\s+\S+\s+[=+-]\S+\s+\S+\s+[\d.]+s\s+[\d.]+\s+(?P<usec>[\d.]+)\s+[\d.]+$"
)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
# Sizes that measure latency rather than bandwidth.
_SMALL_MESSAGE_BYTES = 4096


def parse_pingpong(lines: list[str]) -> dict[int, float]:
    """`usec/xfer` by message size of a `fi_pingpong` result table (bytes #sent #ack total time
    MB/sec usec/xfer Mxfers/sec); lines that are not result rows are ignored."""
    usec: dict[int, float] = {}
    for line in lines:
        if match := _PINGPONG_ROW.match(line.strip()):
            size = match["size"]
            unit = size[-1] if size[-1] in "kmg" else ""
            usec[int(float(size.removesuffix(unit)) * _SIZE_UNITS[unit])] = float(match["usec"])
    return usec


def parse_loopback_latency(efa: Section | None, tcp: Section | None) -> LoopbackLatency | None:
    """The EFA loopback measurement, else the TCP one (reported for information), else why not."""
    if efa is None:
        return None
    for provider, section in (("efa", efa), ("tcp", tcp)):
        rows = parse_pingpong(section.lines) if section is not None else {}
        small = [usec for size, usec in rows.items() if size <= _SMALL_MESSAGE_BYTES]
        if small:
            return LoopbackLatency(provider=provider, small_message_usec=min(small), usec_by_size=rows)
    if efa.tool_missing:
        error = "fi_pingpong is not installed"
    else:
        error = (_first(efa.lines) or f"no result (rc={efa.rc})")[:200]
    return LoopbackLatency(provider="efa", error=error)


_JOB_LINE = re.compile(r"^\s*(?P<pid>\d+)\s+(?P<comm>\S+)\s*$")
_ENVIRON_LINE = re.compile(r"^/proc/(?P<pid>\d+)/environ:(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")
_FR_FILE_LINE = re.compile(r"^file (?P<mtime>\d+(?:\.\d+)?) (?P<size>\d+) (?P<path>\S+)$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")


def parse_nccl_jobs(job_lines: list[str], env_lines: list[str]) -> list[NcclJobProcess]:
    """Training processes (`ps` pid/comm) joined with their NCCL/TORCH_NCCL environment.

    A process that shows NCCL settings but is not a python/torchrun process (a launcher shell,
    say) is kept too: the ranks are what matters for attribution.
    """
    jobs: dict[int, NcclJobProcess] = {}
    for line in job_lines:
        if match := _JOB_LINE.match(line):
            pid = int(match["pid"])
            jobs[pid] = NcclJobProcess(pid=pid, command=match["comm"])
    for line in env_lines:
        if not (match := _ENVIRON_LINE.match(line.strip())):
            continue
        job = jobs.setdefault(int(match["pid"]), NcclJobProcess(pid=int(match["pid"])))
        job.env[match["name"]] = match["value"]
    for job in jobs.values():
        job.rank = _int(job.env.get("RANK"))
        job.local_rank = _int(job.env.get("LOCAL_RANK"))
    return sorted(jobs.values(), key=lambda j: j.pid)


_LIMITS_PROCESS = re.compile(r"^(?P<kind>job|daemon) (?P<pid>[1-9]\d{0,9}) (?P<comm>[A-Za-z0-9._:+?-]{1,15})$")
# /proc/<pid>/limits rows (the kernel's "%-25s %-20s %-20s %-10s"): name, soft, hard, units.
_LIMITS_ROW = re.compile(
    r"^Max (?P<name>locked memory|stack size|open files) {1,40}(?P<soft>unlimited|\d{1,20}) {1,40}"
    r"(?P<hard>unlimited|\d{1,20}) {1,40}(?P<units>bytes|files)\s*$"
)
_DAEMON_ROLES: dict[str, Literal["slurmd", "container_runtime"]] = {
    "slurmd": "slurmd",
    "containerd": "container_runtime",
    "dockerd": "container_runtime",
}


def parse_process_limits(section: Section | None) -> list[ProcessLimits] | None:
    """The `process_limits` section: each process's soft memlock, stack (KiB) and open files, and the
    hard limits beside them; None when the section is absent (a probe that did not read them)."""
    if section is None:
        return None
    found: list[ProcessLimits] = []
    current: ProcessLimits | None = None  # the process the rows below a header belong to
    for raw in section.lines[:64]:
        opened = _LIMITS_PROCESS.match(raw.strip())
        if opened:
            role = "job" if opened["kind"] == "job" else _DAEMON_ROLES.get(opened["comm"])
            # rows under a process of no role belong to no process read here
            current = None if role is None else ProcessLimits(role=role, pid=int(opened["pid"]), command=opened["comm"])
            if current is not None:
                found.append(current)
            continue
        row = _LIMITS_ROW.match(raw.rstrip())
        if row is None or current is None:
            continue
        soft = row["soft"]
        unlimited = soft == "unlimited"
        value = None if unlimited else int(soft)
        limit: Literal["memlock", "stack", "open_files"] = (
            "memlock" if row["name"] == "locked memory" else "stack" if row["name"] == "stack size" else "open_files"
        )
        hard = row["hard"]
        current.hard[limit] = hard if hard == "unlimited" or limit == "open_files" else f"{int(hard) // 1024} KiB"
        if row["name"] == "locked memory":
            current.memlock_unlimited, current.memlock_kib = unlimited, None if value is None else value // 1024
        elif row["name"] == "stack size":
            current.stack_unlimited, current.stack_kib = unlimited, None if value is None else value // 1024
        else:
            current.open_files_unlimited, current.open_files = unlimited, value
    return found


_NET_PLUGIN_FILE = re.compile(r"^(?P<state>present|absent) (?P<path>/[A-Za-z0-9._/-]{1,200})$")


def parse_net_plugin(lines: list[str]) -> tuple[str | None, bool | None]:
    """(the job's NCCL_NET_PLUGIN path, whether the file is there) of the `nccl_net_plugin` section;
    (None, None) when it names no file (unset, a plugin name, no job)."""
    match = _NET_PLUGIN_FILE.match(lines[0].strip()) if lines else None
    if match is None:
        return None, None
    return match["path"], match["state"] == "present"


_JOB_CHOICE = re.compile(
    r"^pid=(?P<pid>\d{1,10}) uid=(?P<uid>\d{1,10}|\?) comm=(?P<comm>\S{1,15})"
    r" candidates=(?P<n>\d{1,6}) why=(?P<why>.{0,200})$"
)


def parse_nccl_job(lines: list[str]) -> NcclJobChoice | None:
    """The `nccl_job` section: which process the probe took for the job and why (None: none runs)."""
    match = _JOB_CHOICE.match(lines[0].strip()) if lines else None
    if match is None:
        return None
    uid = match["uid"]
    return NcclJobChoice(
        pid=int(match["pid"]),
        uid=None if uid == "?" else int(uid),
        command=None if match["comm"] == "?" else match["comm"],
        candidates=int(match["n"]),
        reason=match["why"],
    )


def parse_ras(section: Section | None) -> tuple[str | None, str | None]:
    """(RAS status text, why there is none). Connection refused = no RAS service (NCCL < 2.24 or
    no job); `nc` missing = the node cannot ask."""
    if section is None:
        return None, None
    if section.tool_missing:
        return None, "nc is not installed on the node (NCCL RAS not queried)"
    text = "\n".join(section.lines)[: thresholds.RAS_STATUS_MAX_BYTES]
    if section.rc == 0 and re.search(r"NCCL version|\"communicators\"|Job summary", text):
        return text, None
    first = section.lines[0].strip() if section.lines else f"no answer (rc={section.rc})"
    return None, first[:200]


def parse_flight_recorder(lines: list[str]) -> list[FlightRecorderFile]:
    """Each `file <mtime> <size> <path>` line followed by the file's base64 on one line, at most
    `thresholds.FLIGHT_RECORDER_MAX_FILES` (the probe reads no more; a node that sends more is
    not believed beyond them).

    Oversized or undecodable entries are dropped here; the bytes are never unpickled in the probe
    path (see `hang.flight_recorder.load_dump_data`).
    """
    dumps: list[FlightRecorderFile] = []
    pending: FlightRecorderFile | None = None
    for raw in lines:
        line = raw.strip()
        if match := _FR_FILE_LINE.match(line):
            size = int(match["size"])
            pending = None
            if size <= thresholds.FLIGHT_RECORDER_MAX_BYTES:
                pending = FlightRecorderFile(
                    path=match["path"],
                    rank=rank_from_filename(match["path"]),
                    modified_epoch=float(match["mtime"]),
                    size_bytes=size,
                )
        elif pending is not None and _BASE64.match(line):
            pending.data_base64 = line
            dumps.append(pending)
            pending = None
    return dumps[: thresholds.FLIGHT_RECORDER_MAX_FILES]


def flight_recorder_note(lines: list[str]) -> str | None:
    """The probe's reasons for reading no dump, or not from the job's own prefix (its `skipped: ...`
    lines, joined: a refused prefix is followed by why the default could not be read either)."""
    notes = [line.strip()[:300] for line in lines if line.startswith("skipped: ")][:3]
    return "; ".join(notes) or None


# The probe's own words when it refuses a setting of the job (node_probe.sh: `ras_skip`, `fr_skip`).
_REFUSED_SETTING = re.compile(
    r"^skipped: (?P<name>NCCL_RAS_ADDR|TORCH_NCCL_DEBUG_INFO_TEMP_FILE) of pid (?P<pid>\d{1,10}) "
)
# The nccl_ras section's status when the probe asked nothing (nc never ran).
_RAS_NOT_ASKED_RC = 2


def refused_settings(job: NcclJobChoice, ras: Section | None, dump_lines: list[str]) -> dict[str, str]:
    """The settings of `job` the probe refused to use, by variable, with the probe's line.

    Only lines of the job's own pid count, and a RAS line only when nc never ran: an answer on
    the RAS port is written by whoever listens there and must not be able to pose as a refusal."""
    candidates = [line.strip() for line in dump_lines]
    if ras is not None and ras.rc == _RAS_NOT_ASKED_RC and ras.lines:
        candidates.append(ras.lines[0].strip())
    refused: dict[str, str] = {}
    for line in candidates:
        match = _REFUSED_SETTING.match(line)
        if match and int(match["pid"]) == job.pid:
            refused.setdefault(match["name"], line[:300])
    return refused


# The `imds` section's lines (node_probe.sh): `<name> <value>` when IMDS answered a value of its
# shape, `<name> unavailable|refused (...)` or `unavailable: ...` when it did not.
_IMDS_PATTERNS = {
    "instance-type": re.compile(EC2_INSTANCE_TYPE_PATTERN),
    "availability-zone": re.compile(AVAILABILITY_ZONE_PATTERN),
    "availability-zone-id": re.compile(AVAILABILITY_ZONE_ID_PATTERN),
}
_IMDS_VALUE = re.compile(r"^(?P<name>instance-type|availability-zone|availability-zone-id) (?P<value>\S{1,64})$")
_IMDS_NOTE = re.compile(
    r"^(?:unavailable: |(?:instance-type|availability-zone|availability-zone-id) (?:unavailable|refused) )[ -~]{0,100}$"
)


def parse_imds(section: Section | None) -> HostIdentity | None:
    """The instance type and zone of the `imds` section, each only when it has its shape (a value
    of another shape is refused here too: the node's output is untrusted, whatever the probe
    checked); None when the section is missing (an older probe)."""
    if section is None:
        return None
    if section.tool_missing:
        return HostIdentity(notes=["curl is not installed on the node (IMDS not asked)"])
    found: dict[str, str] = {}
    notes: list[str] = []
    for raw in section.lines[:8]:
        line = raw.strip()
        value = _IMDS_VALUE.match(line)
        if value and _IMDS_PATTERNS[value["name"]].fullmatch(value["value"]):
            found.setdefault(value["name"], value["value"])
        elif _IMDS_NOTE.match(line):
            notes.append(line)
        elif value:
            notes.append(f"{value['name']} refused (not of its shape)")
    if not found and not notes:
        notes.append(f"no answer (rc={section.rc})")
    return HostIdentity(
        instance_type=found.get("instance-type"),
        availability_zone=found.get("availability-zone"),
        availability_zone_id=found.get("availability-zone-id"),
        notes=notes[:4],
    )


# The kernel log tail: at most this many lines (the probe keeps 20), each cut to this length.
KERNEL_LOG_MAX_LINES = 20
KERNEL_LOG_MAX_CHARS = 300


def parse_kernel_log(lines: list[str]) -> list[str]:
    """The `kernel_log` section's lines, the newest KERNEL_LOG_MAX_LINES, each cut to
    KERNEL_LOG_MAX_CHARS (the probe bounds both already; a node is not believed beyond them)."""
    return [line.strip()[:KERNEL_LOG_MAX_CHARS] for line in lines if line.strip()][-KERNEL_LOG_MAX_LINES:]


def _statuses(sections: dict[str, Section]) -> list[SectionStatus]:
    return [SectionStatus(name=s.name, rc=s.rc, lines=len(s.lines)) for s in sections.values()]


def parse_node_probe(output: str) -> NodeProbeData:
    """Parse the output of `node_probe.sh`."""
    sections = split_sections(output)

    def lines(name: str) -> list[str]:
        return _ok_lines(sections.get(name))

    gpu_list = sections.get(NodeSection.GPU_LIST)
    gpu_present: bool | None = None
    if gpu_list is not None:
        gpu_present = any(line.startswith("GPU ") for line in gpu_list.lines)
    gpu_xml = sections.get(NodeSection.GPU_XML)
    report = parse_gpu_report(gpu_xml.text if gpu_xml is not None and not gpu_xml.tool_missing else "")
    gpus = report.gpus
    dcgm = sections.get(NodeSection.DCGM_HEALTH)
    dcgm_overall, dcgm_incidents = parse_dcgm_health(dcgm.text if dcgm is not None and not dcgm.tool_missing else "")
    nvlink_lines = lines(NodeSection.NVLINK) if gpu_present else []
    nvlink_gpus = parse_nvlink_gpus(nvlink_lines)
    nvlink_active, nvlink_inactive = nvlink_totals(nvlink_gpus) if nvlink_lines else (None, [])
    nv_pairs, pcie_pairs = parse_topology(lines(NodeSection.TOPOLOGY) if gpu_present else [])
    cmdline = " ".join(lines(NodeSection.CMDLINE))
    iommu: bool | None = None
    if NodeSection.CMDLINE in sections or NodeSection.IOMMU_DMESG in sections:
        iommu = bool(re.search(r"\b(intel_iommu|amd_iommu)=on\b", cmdline)) or bool(lines(NodeSection.IOMMU_DMESG))
    fi_domains, fi_error = parse_fi_info(sections.get(NodeSection.FI_INFO_EFA))
    # At most 19 digits (an int64): a longer number is no meminfo value, and int() of thousands of
    # digits raises.
    hugepages = dict(re.findall(r"^(\w+):\s+(\d{1,19})\b", "\n".join(lines(NodeSection.HUGEPAGES)), re.M))
    shm_type, shm_size, shm_mount = parse_shm(lines(NodeSection.SHM))
    memlock, memlock_unlimited = _limit(lines(NodeSection.MEMLOCK))
    stack, stack_unlimited = _limit(lines(NodeSection.STACK))
    remove_ipc = _version_from(r"RemoveIPC\s*=\s*(\S+)", "\n".join(lines(NodeSection.REMOVE_IPC)))
    efa_devices = (
        [d for d in lines(NodeSection.EFA_DEVICES) if d.strip()] if NodeSection.EFA_DEVICES in sections else None
    )
    uverbs = sections.get(NodeSection.UVERBS)
    ras_status, ras_error = parse_ras(sections.get(NodeSection.NCCL_RAS))
    job = parse_nccl_job(lines(NodeSection.NCCL_JOB))
    if job is not None:
        job.refused = refused_settings(job, sections.get(NodeSection.NCCL_RAS), lines(NodeSection.FLIGHT_RECORDER))
    plugin, plugin_present = parse_net_plugin(lines(NodeSection.NCCL_NET_PLUGIN))
    xids, sxids = parse_driver_faults(
        [lines(NodeSection.XID_DMESG), lines(NodeSection.XID_JOURNAL)],
        [lines(NodeSection.XID_COUNTS_DMESG), lines(NodeSection.XID_COUNTS_JOURNAL)],
    )
    clock = _first(lines(NodeSection.CLOCK))
    return NodeProbeData(
        hostname=_first(lines(NodeSection.HOSTNAME)),
        clock_epoch=int(clock) if clock and re.fullmatch(r"\d{9,11}", clock) else None,
        host_identity=parse_imds(sections.get(NodeSection.IMDS)),
        gpu_present=gpu_present,
        gpu_query_ok=None if gpu_xml is None or not gpu_present else gpu_xml.rc == 0 and bool(gpus),
        gpu_query_messages=report.messages if report.error is None else [report.error, *report.messages],
        gpus=gpus,
        xids=xids,
        sxids=sxids,
        remapped_rows=report.remapped_rows,
        dcgm_overall=dcgm_overall,
        dcgm_incidents=dcgm_incidents,
        nvvs_failures=lines(NodeSection.NVVS_TAIL)[:20],
        nvlink_active=nvlink_active,
        nvlink_inactive=nvlink_inactive,
        topology_nvlink_pairs=nv_pairs,
        topology_pcie_pairs=pcie_pairs,
        gpu_nic_affinity=parse_gpu_nic_affinity(lines(NodeSection.TOPOLOGY) if gpu_present else []),
        nvlink_gpus=nvlink_gpus,
        acs_enabled_bridges=parse_acs(lines(NodeSection.PCI_ACS)),
        iommu_enabled=iommu,
        kernel_log=parse_kernel_log(lines(NodeSection.KERNEL_LOG)),
        kernel_modules=[line.split()[0] for line in lines(NodeSection.MODULES) if line.split()],
        efa_devices=[d for d in efa_devices if not d.startswith("ls:")] if efa_devices is not None else None,
        uverbs_devices=None if uverbs is None else sum(1 for line in uverbs.lines if line.strip().startswith("uverbs")),
        fi_info_efa_domains=fi_domains,
        fi_info_error=fi_error,
        fi_info_efa_entries=parse_fi_info_entries(sections.get(NodeSection.FI_INFO_EFA)),
        process_limits=parse_process_limits(sections.get(NodeSection.PROCESS_LIMITS)),
        nccl_net_plugin=plugin,
        nccl_net_plugin_present=plugin_present,
        ofi_nccl_plugin=[
            line.strip() for line in lines(NodeSection.OFI_NCCL) if line.strip() and not line.endswith(":")
        ],
        versions=parse_versions(sections, report),
        hugepages_total=_int(hugepages.get("HugePages_Total")),
        hugepages_free=_int(hugepages.get("HugePages_Free")),
        hugepage_size_kib=_int(hugepages.get("Hugepagesize")),
        mem_total_kib=_int(hugepages.get("MemTotal")),
        interfaces=parse_interfaces(lines(NodeSection.INTERFACES), lines(NodeSection.LINKS)),
        shm_fstype=shm_type,
        shm_size_bytes=shm_size,
        shm_mount=shm_mount,
        memlock_kib=memlock,
        memlock_unlimited=memlock_unlimited,
        stack_kib=stack,
        stack_unlimited=stack_unlimited,
        remove_ipc=remove_ipc,
        numa_nodes=len(lines(NodeSection.NUMA)) if NodeSection.NUMA in sections else None,
        firewall_rules=parse_firewall(sections.get(NodeSection.FIREWALL), sections.get(NodeSection.FIREWALL_NFT)),
        stale_shm_files=[line.strip() for line in lines(NodeSection.STALE_SHM) if line.strip().startswith("nccl-")],
        training_processes=_int(_first(lines(NodeSection.TRAINING_PROCS))),
        efa_counters=parse_efa_counters(lines(NodeSection.EFA_COUNTERS)),
        efa_latency=parse_loopback_latency(
            sections.get(NodeSection.EFA_LATENCY), sections.get(NodeSection.EFA_LATENCY_TCP)
        ),
        nccl_jobs=parse_nccl_jobs(lines(NodeSection.NCCL_JOBS), lines(NodeSection.NCCL_JOB_ENV)),
        ras_status=ras_status,
        ras_error=ras_error,
        flight_recorder_dumps=parse_flight_recorder(lines(NodeSection.FLIGHT_RECORDER)),
        nccl_job=job,
        flight_recorder_error=flight_recorder_note(lines(NodeSection.FLIGHT_RECORDER)),
        sections=_statuses(sections),
    )


def parse_sinfo(lines: list[str]) -> list[SlurmNodeState]:
    """`%N|%n|%o|%T|%E` rows (state suffixes such as `*` or `~` are kept in the state). The reason is
    free text set by admins and may itself contain `|`."""
    nodes = []
    for line in lines:
        fields = line.split("|", 4)
        if len(fields) != 5:
            continue
        reason = fields[4].strip()
        nodes.append(
            SlurmNodeState(
                name=fields[0].strip(),
                hostname=fields[1].strip() or None,
                address=fields[2].strip() or None,
                state=fields[3].strip(),
                reason=None if reason in ("", "none", "(null)") else reason,
            )
        )
    return nodes


def parse_squeue(lines: list[str]) -> list[SlurmQueueEntry]:
    """`%i|%j|%T|%R` rows of pending and completing jobs."""
    entries = []
    for line in lines:
        fields = line.split("|")
        if len(fields) == 4:
            entries.append(SlurmQueueEntry(job_id=fields[0], name=fields[1], state=fields[2], reason=fields[3]))
    return entries


# Bounded and possessive runs: sinfo/squeue lines carry job names anyone can choose, and an
# unbounded run before a literal retries from every position of a crafted line (quadratic).
_SLURMCTLD = re.compile(r"Slurmctld\((?P<roles>[^)]{1,64}+)\) at (?P<hosts>\S++) (?:is|are) (?P<states>[A-Z/]++)")
_CONTACT_ERROR = re.compile(r"Unable to contact slurm controller|slurm_load_\w{1,64}+: .{0,400}(?:error|failure)", re.I)


_PING_ATTEMPT = re.compile(r"^attempt (?P<n>[1-9])$")


def last_ping_attempt(lines: list[str]) -> tuple[int, list[str]]:
    """(how many times the probe asked, the last answer's lines) of the `slurm_ping` section, whose
    answers each follow an `attempt N` line; lines without one (older probes) are one answer."""
    attempts, answer = 0, list(lines)
    for index, line in enumerate(lines):
        match = _PING_ATTEMPT.match(line.strip())
        if match:
            attempts, answer = int(match.group("n")), lines[index + 1 :]
    return max(attempts, 1 if lines else 0), answer


def parse_scontrol_ping(lines: list[str]) -> list[SlurmctldState]:
    """Each controller of `scontrol ping`: one line per controller (`Slurmctld(primary) at h is UP`)
    or, from older Slurm, one line for both (`Slurmctld(primary/backup) at a/b are UP/DOWN`)."""
    controllers = []
    for line in lines:
        match = _SLURMCTLD.search(line)
        if match is None:
            continue
        roles, hosts, states = (match.group(g).split("/") for g in ("roles", "hosts", "states"))
        if len(roles) == len(hosts) == len(states):
            rows = zip(roles, hosts, states, strict=True)
            controllers += [SlurmctldState(role=role, host=host, state=state) for role, host, state in rows]
    return controllers


def parse_slurm_controller(output: str) -> SlurmControllerData:
    """Parse the output of `slurm_controller.sh`."""
    sections = split_sections(output)

    def lines(name: str) -> list[str]:
        return _ok_lines(sections.get(name))

    munge = lines(SlurmSection.MUNGE)
    contact = [
        line.strip()
        for name in (SlurmSection.SINFO, SlurmSection.SQUEUE)
        for line in lines(name)
        if _CONTACT_ERROR.search(line)
    ]
    attempts, ping = last_ping_attempt(lines(SlurmSection.SLURM_PING))
    ping_section = sections.get(SlurmSection.SLURM_PING)
    return SlurmControllerData(
        ping_output="\n".join(line for line in ping if line.strip()) or None,
        ping_attempts=attempts,
        scontrol_missing=ping_section is not None and ping_section.tool_missing,
        controllers=parse_scontrol_ping(ping),
        contact_errors=contact[:4],
        munge_state=munge[0].strip() if munge else None,
        nodes=parse_sinfo(lines(SlurmSection.SINFO)),
        queue=parse_squeue(lines(SlurmSection.SQUEUE)),
        nccl_env=[line.split(":", 1)[-1].strip() for line in lines(SlurmSection.NCCL_ENV_FILES)][:30],
        remove_ipc=_version_from(r"RemoveIPC\s*=\s*(\S+)", "\n".join(lines(SlurmSection.REMOVE_IPC))),
        sections=_statuses(sections),
    )
