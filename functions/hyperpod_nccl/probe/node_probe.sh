# hyperpod-nccl node probe (read-only). Every external command runs under its own `timeout`;
# each section prints "@@BEGIN <name>", the command output, then "@@END <name> rc=<status>".
# Only read-only tools are used (tests/unit/test_probe_allowlist.py enforces the allowlist).
export LC_ALL=C
export PATH="$PATH:/opt/amazon/efa/bin:/usr/local/cuda/bin:/usr/sbin:/sbin"
begin() { printf '@@BEGIN %s\n' "$1"; }
end() { printf '@@END %s rc=%s\n' "$1" "$2"; }

begin kernel
timeout 5 uname -r 2>&1
end kernel "$?"

begin hostname
timeout 5 hostname 2>&1
end hostname "$?"

begin gpu_list
timeout 20 nvidia-smi -L 2>&1
end gpu_list "$?"

begin gpu_query
timeout 20 nvidia-smi --query-gpu=index,name,pci.bus_id,serial,uuid,driver_version,temperature.gpu,ecc.errors.uncorrected.volatile.total --format=csv,noheader 2>&1
end gpu_query "$?"

begin cuda_version
timeout 20 nvidia-smi -q 2>&1 | grep -E 'CUDA Version|Driver Version' | head -n 2
end cuda_version "${PIPESTATUS[0]}"

begin xid_dmesg
timeout 10 dmesg -T 2>&1 | grep -E 'NVRM: Xid|fallen off the bus' | tail -n 50
end xid_dmesg "${PIPESTATUS[0]}"

begin xid_journal
timeout 15 journalctl -k --no-pager -q --since -24h 2>&1 | grep -E 'NVRM: Xid' | tail -n 50
end xid_journal "${PIPESTATUS[0]}"

begin remapped_rows
timeout 20 nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader 2>&1
end remapped_rows "$?"

begin dcgm_health
timeout 20 dcgmi health --check -j 2>&1
end dcgm_health "$?"

begin nvvs_log
timeout 5 ls -t /var/log/nvidia-dcgm/ 2>&1 | grep -E '^nvvs.*\.log$' | head -n 1
end nvvs_log "${PIPESTATUS[0]}"

begin nvvs_tail
timeout 5 tail -n 200 /var/log/nvidia-dcgm/nvvs.log 2>&1 | grep -E 'FAIL|Error|remap' | tail -n 20
end nvvs_tail "${PIPESTATUS[0]}"

begin nvlink
timeout 20 nvidia-smi nvlink --status 2>&1
end nvlink "$?"

begin topology
timeout 20 nvidia-smi topo -m 2>&1 | head -n 25
end topology "${PIPESTATUS[0]}"

begin pci_acs
timeout 20 lspci -vvv 2>&1 | grep -E '^[0-9a-f]{2,4}:|ACSCtl:' | grep -B1 'ACSCtl:' | grep -v '^--$'
end pci_acs "${PIPESTATUS[0]}"

begin cmdline
timeout 5 cat /proc/cmdline 2>&1
end cmdline "$?"

begin iommu_dmesg
timeout 10 dmesg 2>&1 | grep -iE 'iommu.*enabled|dmar: intel' | head -n 5
end iommu_dmesg "${PIPESTATUS[0]}"

begin modules
timeout 5 lsmod 2>&1 | grep -E '^(efa|nvidia|nvidia_peermem|nv_peer_mem|ib_core|ib_uverbs|gdrdrv) '
end modules "${PIPESTATUS[0]}"

begin efa_module_version
timeout 5 cat /sys/module/efa/version 2>&1
end efa_module_version "$?"

begin efa_devices
timeout 5 ls /sys/class/infiniband/ 2>&1
end efa_devices "$?"

begin uverbs
timeout 5 ls /dev/infiniband/ 2>&1
end uverbs "$?"

begin fi_info_efa
timeout 20 fi_info -p efa -t FI_EP_RDM 2>&1 | grep -E 'provider:|domain:|fabric:|fi_getinfo'
end fi_info_efa "${PIPESTATUS[0]}"

begin fi_info_version
timeout 10 fi_info --version 2>&1
end fi_info_version "$?"

begin efa_installer
timeout 5 cat /opt/amazon/efa_installed_packages 2>&1
end efa_installer "$?"

begin ofi_nccl
timeout 5 ls /opt/amazon/ofi-nccl/lib/ /opt/amazon/ofi-nccl/lib64/ /opt/aws-ofi-nccl/lib/ /usr/local/lib/ 2>&1 | grep -E 'libnccl-net|libnccl-ofi'
end ofi_nccl "${PIPESTATUS[0]}"

begin nccl_libs
timeout 5 ls /usr/lib/x86_64-linux-gnu/ /usr/local/lib/ /opt/nccl/build/lib/ /usr/local/cuda/lib64/ 2>&1 | grep -E '^libnccl\.so\.[0-9]'
end nccl_libs "${PIPESTATUS[0]}"

begin nccl_header
timeout 5 grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH) ' /usr/include/nccl.h /usr/local/cuda/include/nccl.h /opt/nccl/build/include/nccl.h 2>&1
end nccl_header "$?"

begin hugepages
timeout 5 grep -E '^(HugePages_Total|HugePages_Free|Hugepagesize|MemTotal):' /proc/meminfo 2>&1
end hugepages "$?"

begin interfaces
timeout 5 ip -br addr show 2>&1
end interfaces "$?"

begin links
timeout 5 ip -o link show 2>&1
end links "$?"

begin shm
timeout 10 df -B1 --output=fstype,size,avail,target /dev/shm 2>&1
end shm "$?"

begin memlock
ulimit -l 2>&1
end memlock "$?"

begin stack
ulimit -s 2>&1
end stack "$?"

begin remove_ipc
timeout 5 grep -rhE '^[[:space:]]*RemoveIPC' /etc/systemd/logind.conf /etc/systemd/logind.conf.d/ 2>&1
end remove_ipc "$?"

begin numa
timeout 5 ls /sys/devices/system/node/ 2>&1 | grep -E '^node[0-9]+$'
end numa "${PIPESTATUS[0]}"

begin firewall
timeout 10 iptables -S 2>&1 | grep -E '(-j|--jump) (DROP|REJECT)' | grep -vE 'KUBE-|CILIUM|cali-'
end firewall "${PIPESTATUS[0]}"

begin stale_shm
timeout 5 ls /dev/shm/ 2>&1 | grep -E '^nccl-'
end stale_shm "${PIPESTATUS[0]}"

begin training_procs
timeout 5 ps -eo comm= 2>&1 | grep -cE '^(python|python3|torchrun|mpirun|all_reduce_perf|srun)$'
end training_procs "${PIPESTATUS[0]}"

begin efa_counters
timeout 10 grep -H . /sys/class/infiniband/rdmap*/ports/1/hw_counters/rx_drops /sys/class/infiniband/rdmap*/ports/1/hw_counters/retrans_timeout_events /sys/class/infiniband/rdmap*/ports/1/hw_counters/unresponsive_remote_events /sys/class/infiniband/rdmap*/ports/1/hw_counters/impaired_remote_conn_events 2>&1
end efa_counters "$?"

# EFA latency (original probe 34): a loopback fi_pingpong, server and client on this node only,
# the way the EFA installer's own efa_test.sh checks a device. The server starts in the background
# under its own timeout (stdout discarded: the client prints the same table) and the client, which
# connects once and does not retry, starts a second later. SHM transfer is off so the messages go
# through the EFA device rather than shared memory. Without EFA the same test over TCP is reported.
export FI_EFA_ENABLE_SHM_TRANSFER=0
pingpong() { timeout 15 fi_pingpong -p "$1" -e rdm -I 100 >/dev/null 2>&1 & timeout 3 sleep 1; timeout 10 fi_pingpong -p "$1" -e rdm -I 100 127.0.0.1 2>&1 | tail -n 8; return "${PIPESTATUS[0]}"; }
begin efa_latency
pingpong efa
efa_latency_rc=$?
end efa_latency "$efa_latency_rc"
begin efa_latency_tcp
[ "$efa_latency_rc" = 0 ] || pingpong tcp
end efa_latency_tcp "$?"

# Hang attribution (read-only). The first process whose environment carries NCCL/PyTorch-NCCL
# settings is "the job"; its environment gives the RAS address and the Flight Recorder prefix.
# `lastpipe` lets `read` at the end of a pipeline set variables without command substitution.
shopt -s lastpipe
job_environ=
ras_line=
fr_line=
timeout 5 grep -zslE '^(NCCL_|TORCH_NCCL_)' /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | head -n 1 | read -r job_environ
job_proc=${job_environ%/environ}

begin nccl_jobs
timeout 5 ps -eo pid=,comm= 2>&1 | grep -E ' (python[0-9.]*|torchrun)$' | head -n 64
end nccl_jobs "${PIPESTATUS[0]}"

begin nccl_job_env
timeout 10 grep -zsoHE '^(RANK|LOCAL_RANK|NCCL_RAS_ADDR|NCCL_RAS_ENABLE|NCCL_DEBUG|TORCH_NCCL_DEBUG_INFO_TEMP_FILE|TORCH_NCCL_TRACE_BUFFER_SIZE|TORCH_NCCL_DUMP_ON_TIMEOUT|NCCL_P2P_DISABLE|NCCL_IB_DISABLE|NCCL_SHM_DISABLE|NCCL_NVLS_ENABLE)=[^[:cntrl:]]{0,256}' /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | head -n 4000
end nccl_job_env "${PIPESTATUS[0]}"

# NCCL RAS (NCCL >= 2.24): a client-only connection to the node-local RAS port asking for STATUS.
timeout 5 grep -zshoE '^NCCL_RAS_ADDR=[^[:cntrl:]]+' "$job_environ" 2>/dev/null | tr '\0' '\n' | head -n 1 | read -r ras_line
ras_addr=${ras_line#NCCL_RAS_ADDR=}
ras_addr=${ras_addr:-localhost:28028}
begin nccl_ras
printf 'CLIENT PROTOCOL 2\nSTATUS\n' | timeout 20 nc -w 15 "${ras_addr%:*}" "${ras_addr##*:}" 2>&1 | head -c 16777216
end nccl_ras "${PIPESTATUS[1]}"

# PyTorch Flight Recorder dumps, read through the job's root (they live in its container),
# only files changed in the last 24 h and under the size cap (thresholds.FLIGHT_RECORDER_MAX_BYTES).
timeout 5 grep -zshoE '^TORCH_NCCL_DEBUG_INFO_TEMP_FILE=[^[:cntrl:]]+' "$job_environ" 2>/dev/null | tr '\0' '\n' | head -n 1 | read -r fr_line
fr_prefix=${fr_line#TORCH_NCCL_DEBUG_INFO_TEMP_FILE=}
fr_prefix=${fr_prefix:-/tmp/nccl_trace_rank_}
begin flight_recorder
for fr_file in "${job_proc:-/proc/1}/root$fr_prefix"*; do timeout 5 find "$fr_file" -maxdepth 0 -type f -mmin -1440 -size -32768k -printf 'file %T@ %s %p\n' 2>/dev/null | grep -E '^file ' && timeout 20 base64 -w 0 "$fr_file" 2>/dev/null && printf '\n'; done
end flight_recorder 0
