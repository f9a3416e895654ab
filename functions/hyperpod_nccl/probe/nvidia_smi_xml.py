"""`nvidia-smi -q -x`: every GPU's identity, ECC counts, memory repair state and clocks in one document.

The format is NVIDIA's own, published with a DTD (`nvsmi_device_v<N>.dtd`, named by the document's
DOCTYPE line). Its layout moved over driver releases, and this reader takes each form seen in real
output (tests/data/probe/README.md names them):

- ECC counts: `single_bit`/`double_bit` blocks with a `total` (Pascal/Volta era drivers), or flat
  `sram_uncorrectable` / `dram_uncorrectable` counts (Ampere and newer), `sram_uncorrectable` split
  into `_parity` and `_secded` by recent drivers;
- memory repair: `retired_pages` (dynamic page retirement, GPUs before Ampere) and `remapped_rows`
  (row remapping, Ampere and newer); each is the text `N/A` where the GPU does not do it;
- clock limits: `clocks_throttle_reasons` (older drivers) or `clocks_event_reasons` (newer).

The document comes from the node, so it is read as hostile input: bounded in size and in GPUs, no
entity declarations or internal DTD subset accepted (nvidia-smi writes neither), every value length-
and shape-checked before it reaches a model. Lines around the document (nvidia-smi prints its error
messages to stderr, which the probe merges) are kept, bounded, as messages.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

from hyperpod_nccl.models.node_probe import GpuInfo, RemappedRows, canonical_pci_bus_id

# The probe cuts the document at 1 MiB (a GPU takes 10-25 KB in the real samples); a longer one is not read.
MAX_DOCUMENT_CHARS = 1_048_576
# More GPUs than any instance has: the rest of a document that claims more is not read.
MAX_GPUS = 64
# A value longer than this is no nvidia-smi value (product names and versions are far shorter).
MAX_VALUE_CHARS = 128
# Messages kept from around the document (nvidia-smi's own errors), each cut to this length.
MAX_MESSAGES = 8
MAX_MESSAGE_CHARS = 300

# The one DOCTYPE nvidia-smi writes: an external DTD by name, no internal subset.
_DOCTYPE = re.compile(r'<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+"nvsmi_device(?:_v\d{1,3})?\.dtd"\s*>')
_OPEN, _CLOSE = "<nvidia_smi_log", "</nvidia_smi_log>"
_NOT_AVAILABLE = frozenset({"", "n/a", "[n/a]", "[not supported]", "[unknown error]", "not supported"})
# The clock limits that mean hardware or thermal trouble (a slow rank stalls every collective); the
# others (idle, application clocks, software power cap, sync boost, display) are policy, not faults.
CLOCK_FAULT_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


@dataclass
class GpuReport:
    """What `nvidia-smi -q -x` said, or why it could not be read (`error`)."""

    gpus: list[GpuInfo] = field(default_factory=list)
    remapped_rows: list[RemappedRows] = field(default_factory=list)
    driver_version: str | None = None
    cuda_version: str | None = None
    messages: list[str] = field(default_factory=list)
    error: str | None = None


def _value(element: ElementTree.Element | None, path: str) -> str | None:
    """The text at `path` under `element`, None where absent, N/A or not a plausible value."""
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    text = found.text.strip()
    if text.lower() in _NOT_AVAILABLE or len(text) > MAX_VALUE_CHARS or not text.isprintable():
        return None
    return text


def _count(element: ElementTree.Element | None, path: str) -> int | None:
    """A non-negative count at `path` (`38 C` reads 38), None where absent or not a number."""
    text = _value(element, path)
    match = re.fullmatch(r"(\d{1,12})(?: [A-Za-z%]{1,4})?", text or "")
    return int(match.group(1)) if match else None


def _yes(element: ElementTree.Element | None, path: str) -> bool | None:
    text = _value(element, path)
    if text is None:
        return None
    return text.lower() in ("yes", "1", "true")


def _sum(values: list[int | None]) -> int | None:
    """The sum of the counts that were given; None when none was."""
    given = [v for v in values if v is not None]
    return sum(given) if given else None


def _uncorrectable(ecc: ElementTree.Element | None, scope: str) -> int | None:
    """Uncorrectable ECC errors of `scope` (`volatile` or `aggregate`) in whichever layout the driver wrote."""
    block = ecc.find(scope) if ecc is not None else None
    if block is None:
        return None
    if block.find("double_bit") is not None:
        return _count(block, "double_bit/total")
    sram = _count(block, "sram_uncorrectable")
    if sram is None:
        sram = _sum([_count(block, "sram_uncorrectable_parity"), _count(block, "sram_uncorrectable_secded")])
    return _sum([sram, _count(block, "dram_uncorrectable")])


def _clock_faults(gpu: ElementTree.Element) -> list[str]:
    """The fault-like clock limits that are active (names without their `clocks_*_reason_` prefix)."""
    block = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if block is None:
        block, prefix = gpu.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
    if block is None:
        return []
    return [reason for reason in CLOCK_FAULT_REASONS if (_value(block, prefix + reason) or "").lower() == "active"]


def _remapped_rows(gpu: ElementTree.Element, bus_id: str) -> RemappedRows | None:
    """The GPU's row-remapping state; None where it does none (`<remapped_rows>N/A</remapped_rows>`)."""
    block = gpu.find("remapped_rows")
    if block is None or len(block) == 0:
        return None
    return RemappedRows(
        bus_id=bus_id,
        correctable=_count(block, "remapped_row_corr"),
        uncorrectable=_count(block, "remapped_row_unc"),
        pending=bool(_yes(block, "remapped_row_pending")),
        failure=bool(_yes(block, "remapped_row_failure")),
    )


def _gpu(index: int, gpu: ElementTree.Element, driver: str | None) -> tuple[GpuInfo, RemappedRows | None] | None:
    bus = canonical_pci_bus_id(_value(gpu, "pci/pci_bus_id") or gpu.get("id", "")[:MAX_VALUE_CHARS])
    if not re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", bus):
        return None
    retired, ecc = gpu.find("retired_pages"), gpu.find("ecc_errors")
    info = GpuInfo(
        index=index,
        name=_value(gpu, "product_name") or "unknown GPU",
        bus_id=bus,
        serial=_value(gpu, "serial"),
        uuid=_value(gpu, "uuid"),
        driver_version=driver,
        temperature_c=_count(gpu, "temperature/gpu_temp"),
        ecc_uncorrected_volatile=_uncorrectable(ecc, "volatile"),
        ecc_uncorrected_aggregate=_uncorrectable(ecc, "aggregate"),
        retired_pages_single_bit=_count(retired, "multiple_single_bit_retirement/retired_count"),
        retired_pages_double_bit=_count(retired, "double_bit_retirement/retired_count"),
        # `pending_blacklist` is the older drivers' name of the same flag.
        retirement_pending=_yes(retired, "pending_retirement") or _yes(retired, "pending_blacklist"),
        clock_faults=_clock_faults(gpu),
    )
    return info, _remapped_rows(gpu, bus)


def _messages(text: str) -> list[str]:
    lines = ["".join(ch for ch in line if ch.isprintable()).strip() for line in text.splitlines()]
    return [line[:MAX_MESSAGE_CHARS] for line in lines if line][:MAX_MESSAGES]


def _document_start(text: str) -> int:
    """Where the root element opens (`<nvidia_smi_log>` or with attributes), or -1."""
    at = text.find(_OPEN)
    while at >= 0:
        following = text[at + len(_OPEN) : at + len(_OPEN) + 1]
        if following in (">", " ", "\t", "\n", "\r", "/"):
            return at
        at = text.find(_OPEN, at + 1)
    return -1


def parse_gpu_report(text: str) -> GpuReport:
    """The GPUs of an `nvidia-smi -q -x` answer (with whatever nvidia-smi printed around it)."""
    if len(text) > MAX_DOCUMENT_CHARS:
        return GpuReport(error=f"answer of {len(text):,} characters not read (the probe keeps {MAX_DOCUMENT_CHARS:,})")
    # str.find, not a regular expression: linear on any answer (a lazy `.*?` between the two tags
    # is quadratic on a crafted line of many opening tags and no closing one).
    opened = _document_start(text)
    if opened < 0:
        return GpuReport(messages=_messages(text), error="no nvidia_smi_log document in the answer")
    closed = text.find(_CLOSE, opened)
    if closed < 0:
        return GpuReport(messages=_messages(text[:opened]), error="document cut off before </nvidia_smi_log>")
    end = closed + len(_CLOSE)
    outside = text[:opened] + "\n" + text[end:]
    messages = [m for m in _messages(_DOCTYPE.sub("", outside)) if not m.startswith("<?xml")]
    document = text[opened:end]
    # ElementTree does not fetch external entities, and expat bounds entity expansion, but a node
    # has no reason to declare any: refuse instead of relying on either.
    if "<!" in document.replace("<![CDATA[", ""):
        return GpuReport(messages=messages, error="declarations inside the document (nvidia-smi writes none)")
    try:
        root = ElementTree.fromstring(document)
    except ElementTree.ParseError as error:
        return GpuReport(messages=messages, error=f"not well-formed XML ({error})")
    driver = _value(root, "driver_version")
    report = GpuReport(driver_version=driver, cuda_version=_value(root, "cuda_version"), messages=messages)
    for index, gpu in enumerate(root.findall("gpu")[:MAX_GPUS]):
        parsed = _gpu(index, gpu, driver)
        if parsed is None:
            messages.append(f"GPU {index}: no PCI address of its shape; not read")
            continue
        report.gpus.append(parsed[0])
        if parsed[1] is not None:
            report.remapped_rows.append(parsed[1])
    return report
