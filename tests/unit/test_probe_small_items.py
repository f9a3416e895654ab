"""The probe's smaller readings (issue 17, point 5): values nvidia-smi prints in words, and a
/dev/shm that is no mount of its own."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.parsers import parse_node_probe
from hyperpod_nccl.probe.sections import NodeSection, begin_line, end_line
from tests.builders import probed_node

CHECKS = discover()


def _probe(section: str, lines: list[str]):  # type: ignore[no-untyped-def]
    return parse_node_probe("\n".join([begin_line(section), *lines, end_line(section, 0)]) + "\n")


def test_a_cuda_version_in_words_is_no_version() -> None:
    # nvidia-smi without a usable CUDA driver API says "Not Found" (the text, `-q` form).
    def versions(cuda: str):  # type: ignore[no-untyped-def]
        document = f"<nvidia_smi_log><driver_version>550.127.05</driver_version><cuda_version>{cuda}</cuda_version>"
        return _probe(NodeSection.GPU_XML, [document + "</nvidia_smi_log>"]).versions

    assert (versions("Not Found").driver, versions("Not Found").cuda) == ("550.127.05", None)
    assert versions("12.4").cuda == "12.4"


def test_a_dev_shm_on_the_root_filesystem_warns_instead_of_going_silent() -> None:
    # df -B1 --output=fstype,size,avail,target /dev/shm where /dev/shm is a directory of "/"
    probe = _probe(NodeSection.SHM, ["Type 1B-blocks Avail Mounted on", "overlay 107374182400 53687091200 /"])
    assert (probe.shm_fstype, probe.shm_size_bytes, probe.shm_mount) == ("overlay", 100 * 2**30, "/")
    (finding,) = CHECKS["node.dev_shm"].run(probed_node(probe))
    assert finding.status is Status.WARN and "it lives on / (overlay)" in finding.title
    assert finding.fields["shm_mount"] == "/"


def test_the_newest_dcgm_diagnostic_log_is_read(tmp_path: Path) -> None:
    # The original found the newest nvvs*.log but read a fixed nvvs.log (issue 17, point 7).
    logs = tmp_path / "dcgm"
    logs.mkdir()
    for age, name, line in (
        (300, "nvvs.log", "old run: Error: GPU 0 FAIL"),
        (100, "nvvs_20261206.log", "newest run: Error: GPU 3 FAIL pcie"),
        (10, "nvvs x;y.log", "a name of another shape: never read"),
    ):
        path = logs / name
        path.write_text(f"{line}\n", encoding="utf-8")
        os.utime(path, (time.time() - age, time.time() - age))
    text = script("node")
    block = text[text.index("nvvs_name=\n") : text.index('end nvvs_tail "$nvvs_rc"') + len('end nvvs_tail "$nvvs_rc"')]
    head = text[: text.index("\n", text.index("\nend() {") + 1) + 1]  # PATH, lastpipe, the section markers
    program = head + "\n" + block.replace("/var/log/nvidia-dcgm", str(logs)) + "\n"
    run = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=False)
    probe = parse_node_probe(run.stdout)
    assert probe.nvvs_failures == ["newest run: Error: GPU 3 FAIL pcie"], run.stdout + run.stderr


# `dcgmi health --check -j` of DCGM 4.x, built from dcgmi's own code (NVIDIA/DCGM 72fa3fea:
# Health::GenerateOutputFromResponse / HandleOneEntity / AddErrorMessage, DcgmiOutputBoxer::set
# and addOverflow, JsonCpp's styled writer) with messages of dcgm_errors.h (DCGM_FR_*_MSG) given
# concrete values, indented as JsonCpp's StyledWriter does (3 spaces): no real 4.x answer with an
# incident was found in public (tests/data/probe/README.md).
DCGM4_FAILURE = """{
   "body" :
   {
      "GPU" :
      {
         "children" :
         {
            "1" :
            {
               "children" :
               {
                  "Errors" :
                  {
                     "children" :
                     {
                        "Memory system" :
                        {
                           "overflow" :
                           [
                              "Detected 2 volatile double-bit ECC error(s) in GPU 1."
                           ],
                           "value" : "Failure"
                        },
                        "PCIe system" :
                        {
                           "overflow" :
                           [
                              "Detected more than 8 PCIe replays per minute for GPU 1",
                              ": 12"
                           ],
                           "value" : "Warning"
                        }
                     }
                  }
               },
               "value" : "Failure"
            }
         }
      },
      "Overall Health" :
      {
         "value" : "Failure"
      }
   },
   "header" :
   [
      "Health Monitor Report"
   ]
}"""


def test_dcgm_4_health_json_gives_one_incident_per_gpu_and_system_with_its_message_whole() -> None:
    probe = _probe(NodeSection.DCGM_HEALTH, DCGM4_FAILURE.splitlines())
    assert probe.dcgm_overall == "Failure"
    assert probe.dcgm_incidents == [
        "GPU 1: Memory system Failure: Detected 2 volatile double-bit ECC error(s) in GPU 1.",
        "GPU 1: PCIe system Warning: Detected more than 8 PCIe replays per minute for GPU 1 : 12",
    ]
    [finding] = CHECKS["node.gpu_dcgm"].run(probed_node(probe))
    assert (finding.status, finding.priority) == (Status.FAIL, Priority.P0)
    assert finding.evidence[:2] == probe.dcgm_incidents
