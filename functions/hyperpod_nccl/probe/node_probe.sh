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
timeout 20 fi_info -p efa -t FI_EP_RDM 2>&1 | grep -E 'provider:|domain:|fabric:'
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
