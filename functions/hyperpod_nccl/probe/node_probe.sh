# hyperpod-nccl node probe (read-only). Every external command runs under its own `timeout`;
# each section prints "@@BEGIN <name>", the command output, then "@@END <name> rc=<status>".
# Only read-only tools are used (tests/unit/test_probe_allowlist.py enforces the allowlist).
# No real captured output of these sections has been seen (tests/data/probe/README.md, "Sections
# with no real sample"): their formats are read as the tools document them, not yet as a real host
# printed them: kernel, hostname, clock, imds, xid_counts_dmesg, xid_counts_journal, nvvs_log,
# nvvs_tail, pci_acs, cmdline, iommu_dmesg, modules, efa_module_version, uverbs, fi_info_version,
# ofi_nccl, nccl_libs, nccl_header, interfaces, links, memlock, stack, remove_ipc, numa, firewall,
# firewall_nft, stale_shm, training_procs, efa_latency_tcp, nccl_jobs, nccl_job_env, nccl_job,
# nccl_ras, flight_recorder, nccl_net_plugin (process_limits has real rows under headers of ours).
# No real GPU host was available to any session so far: no section was captured from one, the GPU
# fixtures are public outputs of other hosts.
export LC_ALL=C
export PATH="$PATH:/opt/amazon/efa/bin:/usr/local/cuda/bin:/usr/sbin:/sbin"
# `lastpipe` lets `read` at the end of a pipeline set variables without command substitution.
shopt -s lastpipe
begin() { printf '@@BEGIN %s\n' "$1"; }
end() { printf '@@END %s rc=%s\n' "$1" "$2"; }

begin kernel
timeout 5 uname -r 2>&1
end kernel "$?"

begin hostname
timeout 5 hostname 2>&1
end hostname "$?"

# The node's clock (seconds since the epoch), compared with the collector's: a skewed clock breaks
# munge's credentials, NCCL's and PyTorch's timeouts, and the time windows of this diagnosis.
begin clock
timeout 5 date -u +%s 2>&1
end clock "$?"

# Host info (original probe 1): the instance type and Availability Zone as the instance metadata
# service (IMDSv2) tells them, compared with what HyperPod lists. A session token first (PUT, a
# 60 s lifetime), then each value, each call bounded (1 s to connect, 2 s in all) and never through
# a proxy (one set in the session's environment must not see the token). IMDS may be off, or out of
# reach (a hop limit of 1 seen from a container): the section then says so and the probe goes on.
# A value is printed only when it has its shape (models/node_probe.py spells the same patterns).
re_instance_type='^[a-z][a-z0-9-]{0,15}\.[a-z0-9]{1,16}$'
re_zone='^[a-z]{2}(-[a-z0-9]{1,12}){2,5}[a-z]$'
re_zone_id='^[a-z]{2,5}[0-9]{1,2}(-[a-z]{3}[0-9]{1,2})?-az[0-9]{1,2}$'
imds_token=
imds_type=
imds_zone=
imds_zone_id=
imds_show() { if [ "$2" != 0 ]; then printf '%s unavailable (curl rc=%s)\n' "$1" "$2"; elif [[ $3 =~ $4 ]]; then printf '%s %s\n' "$1" "$3"; else printf '%s refused (%s bytes not of its shape)\n' "$1" "${#3}"; fi; }
begin imds
timeout 5 curl -sf --noproxy '*' --connect-timeout 1 --max-time 2 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token 2>/dev/null | head -c 128 | read -r imds_token
imds_rc=${PIPESTATUS[0]}
imds_answer=$imds_token
[[ $imds_token =~ ^[A-Za-z0-9+/=_-]{16,100}$ ]] || imds_token=
if [ -z "$imds_answer" ]; then printf 'unavailable: no IMDSv2 token (curl rc=%s)\n' "$imds_rc"; fi
if [ -n "$imds_answer" ] && [ -z "$imds_token" ]; then printf 'unavailable: IMDSv2 token refused (%s bytes not of its shape)\n' "${#imds_answer}"; fi
if [ -n "$imds_token" ]; then
  timeout 5 curl -sf --noproxy '*' --connect-timeout 1 --max-time 2 -H "X-aws-ec2-metadata-token: $imds_token" http://169.254.169.254/latest/meta-data/instance-type 2>/dev/null | head -c 64 | read -r imds_type
  imds_show instance-type "${PIPESTATUS[0]}" "$imds_type" "$re_instance_type"
  timeout 5 curl -sf --noproxy '*' --connect-timeout 1 --max-time 2 -H "X-aws-ec2-metadata-token: $imds_token" http://169.254.169.254/latest/meta-data/placement/availability-zone 2>/dev/null | head -c 64 | read -r imds_zone
  imds_show availability-zone "${PIPESTATUS[0]}" "$imds_zone" "$re_zone"
  timeout 5 curl -sf --noproxy '*' --connect-timeout 1 --max-time 2 -H "X-aws-ec2-metadata-token: $imds_token" http://169.254.169.254/latest/meta-data/placement/availability-zone-id 2>/dev/null | head -c 64 | read -r imds_zone_id
  imds_show availability-zone-id "${PIPESTATUS[0]}" "$imds_zone_id" "$re_zone_id"
fi
end imds "$imds_rc"

begin gpu_list
timeout 20 nvidia-smi -L 2>&1
end gpu_list "$?"

# One structured answer for every GPU: identity, driver and CUDA versions, ECC counts (volatile
# and aggregate), retired pages (before Ampere), remapped rows (Ampere and newer), temperature and
# clock limits, in the XML nvidia-smi documents with its DTD (probe/nvidia_smi_xml.py reads it).
# Control characters and marker look-alikes are dropped (process names in it are anyone's), the
# answer is cut at 1 MiB (a GPU takes 10-25 KB in the real samples) and ends with a newline.
# No real H100/H200 `-q -x` document is public: the tests write real H100 values in this XML form.
begin gpu_xml
timeout 20 nvidia-smi -q -x 2>&1 | tr -d '\000-\010\013-\037\177' | grep -av -- '^@@' | head -c 1048576
smi_rc=${PIPESTATUS[0]}
printf '\n'
end gpu_xml "$smi_rc"

# The GPU and NVSwitch drivers' fault lines (shapes from their format strings, hyperpod_nccl/xid.py):
# Xid lines (MIG-attributed ones too), SXid lines, and "fallen off the bus" in its one-line and
# three-line forms. The newest lines are kept as evidence ...
begin xid_dmesg
timeout 10 dmesg -T 2>&1 | grep -E 'NVRM: Xid \(|: SXid \(PCI:|NVRM: .*fallen off the bus|NVRM: The NVIDIA GPU |NVRM: (\(PCI ID: [0-9a-fA-F:]+\) )?installed in this system has$' | tail -n 50
end xid_dmesg "${PIPESTATUS[0]}"

begin xid_journal
timeout 15 journalctl -k --no-pager -q --since -24h 2>&1 | grep -E 'NVRM: Xid \(|: SXid \(PCI:|NVRM: .*fallen off the bus|NVRM: The NVIDIA GPU |NVRM: (\(PCI ID: [0-9a-fA-F:]+\) )?installed in this system has$' | tail -n 50
end xid_journal "${PIPESTATUS[0]}"

# ... and every fault is counted per GPU (or MIG instance, or switch) and code over the whole window,
# so that a storm of one Xid in the tail above cannot hide another, and repeats keep their count.
begin xid_counts_dmesg
timeout 10 dmesg 2>&1 | grep -oE 'NVRM: Xid \((PCI:)?[0-9a-fA-F:.]+( GPU-I:[0-9]+)?( GPU-CI:[0-9]+)?\): [0-9]+|nvidia-[A-Za-z0-9_-]+: SXid \(PCI:[0-9a-fA-F:.]+\): [0-9]+(, (Fatal|Non-fatal))?|NVRM: GPU (at (PCI:)?)?[0-9a-fA-F:.]+:? (GPU )?has fallen off the bus|NVRM: The NVIDIA GPU [0-9a-fA-F:.]+( \(PCI ID: [0-9a-fA-F:]+\) installed in this system has)?$' | sort | uniq -c | head -n 256
end xid_counts_dmesg "${PIPESTATUS[0]}"

begin xid_counts_journal
timeout 15 journalctl -k --no-pager -q --since -24h 2>&1 | grep -oE 'NVRM: Xid \((PCI:)?[0-9a-fA-F:.]+( GPU-I:[0-9]+)?( GPU-CI:[0-9]+)?\): [0-9]+|nvidia-[A-Za-z0-9_-]+: SXid \(PCI:[0-9a-fA-F:.]+\): [0-9]+(, (Fatal|Non-fatal))?|NVRM: GPU (at (PCI:)?)?[0-9a-fA-F:.]+:? (GPU )?has fallen off the bus|NVRM: The NVIDIA GPU [0-9a-fA-F:.]+( \(PCI ID: [0-9a-fA-F:]+\) installed in this system has)?$' | sort | uniq -c | head -n 256
end xid_counts_journal "${PIPESTATUS[0]}"

# No real DCGM 4.x answer with an incident is public: its test builds one from dcgmi's own code.
begin dcgm_health
timeout 20 dcgmi health --check -j 2>&1
end dcgm_health "$?"

# The newest DCGM diagnostic log (nvvs*.log; a name of that shape only), then its failure lines.
nvvs_name=
begin nvvs_log
timeout 5 find -P /var/log/nvidia-dcgm -maxdepth 1 -type f -regextype posix-extended -regex '/var/log/nvidia-dcgm/nvvs[A-Za-z0-9_.-]{0,64}\.log' -printf '%T@ %f\n' 2>&1 | sort -rn | head -n 1 | read -r _ nvvs_name
nvvs_rc=${PIPESTATUS[0]}
[[ $nvvs_name =~ ^nvvs[A-Za-z0-9_.-]{0,64}\.log$ ]] || nvvs_name=
if [ -n "$nvvs_name" ]; then printf '%s\n' "$nvvs_name"; fi
end nvvs_log "$nvvs_rc"

begin nvvs_tail
nvvs_rc=1
if [ -n "$nvvs_name" ]; then timeout 5 tail -n 200 -- "/var/log/nvidia-dcgm/$nvvs_name" 2>&1 | grep -E 'FAIL|Error|remap' | tail -n 20; nvvs_rc=${PIPESTATUS[0]}; fi
end nvvs_tail "$nvvs_rc"

# No real multi-GPU answer of a degraded node is public: its test joins real single-GPU blocks.
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

# Original probe 31: the newest kernel lines about EFA, RDMA and memory errors (ECC, EDAC, machine
# checks), shown as evidence (the GPU driver's own lines are read by the Xid sections above). At
# most 20 lines of at most 300 bytes: dmesg escapes unprintable bytes itself (\xNN) and tr drops
# any control character left, so no line can move a terminal or pass for a section marker.
begin kernel_log
timeout 10 dmesg -T 2>&1 | grep -aiE '\befa|rdma|\bib_|infiniband|\becc\b|edac|hardware error|correctable' | grep -av 'NVRM: ' | tr -d '\000-\010\013-\037\177' | grep -av -- '^@@' | tail -n 20 | grep -aoE -- '^.{1,300}'
end kernel_log "${PIPESTATUS[0]}"

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

# Each entry's provider, domain, version and endpoint type (values of another shape are refused by
# the parser); 512 lines hold 16 devices many times over.
begin fi_info_efa
timeout 20 fi_info -p efa -t FI_EP_RDM 2>&1 | grep -E 'provider:|domain:|fabric:|version:|type:|fi_getinfo' | head -n 512
end fi_info_efa "${PIPESTATUS[0]}"

begin fi_info_version
timeout 10 fi_info --version 2>&1
end fi_info_version "$?"

begin efa_installer
timeout 5 cat /opt/amazon/efa_installed_packages 2>&1
end efa_installer "$?"

begin ofi_nccl
timeout 5 ls /opt/amazon/ofi-nccl/lib/ /opt/amazon/ofi-nccl/lib64/ /opt/aws-ofi-nccl/lib/ /usr/local/lib/ /usr/lib/ /usr/lib64/ 2>&1 | grep -E 'libnccl-net|libnccl-ofi'
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

# Hosts without iptables (nftables only): the same question of `nft list ruleset` (read only), its
# drop/reject rules and drop policies, less the Kubernetes chains and the usual invalid-state drop.
begin firewall_nft
timeout 10 nft list ruleset 2>&1 | grep -E '\b(drop|reject)\b' | grep -vE 'KUBE-|kube-|CILIUM|cilium|cali-|ct state invalid' | head -n 20
end firewall_nft "${PIPESTATUS[0]}"

begin stale_shm
timeout 5 ls /dev/shm/ 2>&1 | grep -E '^nccl-[[:print:]]{0,200}$'
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

# Hang attribution (read-only). Trust: every process on the node, and so everything under
# /proc/<pid>/ (environ, comm) and every file in a job's file system, is written by whoever runs
# that process, which on Slurm is any user of the cluster (and there /proc/<pid>/root is the host's
# `/`). Nothing read there is used before it passes a strict shape: pids are digits, NCCL_RAS_ADDR
# is host:port of this node, the Flight Recorder prefix is a plain absolute path, a dump's name is
# the prefix plus a rank. Values are copied with a length bound and printable ASCII only, and no
# runtime value ever stands where a command could take it for an option.
# A plain absolute path: components of [A-Za-z0-9._-] that do not start with `-`, at most 200
# characters, no empty (`//`), `.` or `..` component. A trailing `/` is kept (a directory prefix).
re_plain_path='^(/[A-Za-z0-9._][A-Za-z0-9._-]*)+/?$'
re_dot_part='(^|/)\.\.?(/|$)'
plain_path() { [ "${#1}" -le 200 ] && [[ $1 =~ $re_plain_path ]] && ! [[ $1 =~ $re_dot_part ]]; }
# The /proc to read. Only tests/functional/test_probe_runtime_hostile.py sets this (to a planted
# tree); nothing in production does, and a value that is not a plain absolute path is ignored.
proc=/proc
plain_path "${HYPERPOD_NCCL_PROBE_PROC_ROOT:-}" && proc=$HYPERPOD_NCCL_PROBE_PROC_ROOT

begin nccl_jobs
timeout 5 ps -eo pid=,comm= 2>&1 | grep -E ' (python[0-9.]*|torchrun|pt_main_thread)$' | head -n 64
end nccl_jobs "${PIPESTATUS[0]}"

begin nccl_job_env
timeout 10 grep -zsoHE -- '^(RANK|LOCAL_RANK|NCCL_RAS_ADDR|NCCL_RAS_ENABLE|NCCL_DEBUG|TORCH_NCCL_DEBUG_INFO_TEMP_FILE|TORCH_NCCL_TRACE_BUFFER_SIZE|TORCH_NCCL_DUMP_ON_TIMEOUT|NCCL_P2P_DISABLE|NCCL_IB_DISABLE|NCCL_SHM_DISABLE|NCCL_NVLS_ENABLE|NCCL_NET_PLUGIN|FI_PROVIDER)=[[:print:]]{0,256}' "$proc"/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | head -n 4000
end nccl_job_env "${PIPESTATUS[0]}"

# "The job": the processes whose environment carries NCCL/PyTorch-NCCL settings are candidates; a
# python/torchrun process (PyTorch names its main thread pt_main_thread) is preferred over a
# launcher or shell, and among those the lowest pid, the one started first. Any user can start
# such a process, so the choice only decides whose settings are read: the RAS query goes to this
# node only, and the dumps read are regular files owned by the chosen process's user.
re_pid='^[1-9][0-9]{0,9}$'
re_job_comm='^(python[0-9.]*|torchrun|pt_main_thread)$'
re_comm='^[A-Za-z0-9._:+-]{1,15}$'
job_pid=
job_uid=
job_comm=
job_candidates=0
job_preferred=
job_other=
job_pids=()
timeout 5 grep -zslE -- '^(NCCL_|TORCH_NCCL_)' "$proc"/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | head -n 4096 | while IFS= read -r environ; do
  pid=${environ#"$proc/"}
  pid=${pid%/environ}
  [[ $pid =~ $re_pid ]] || continue
  [ "$environ" = "$proc/$pid/environ" ] || continue
  comm=
  IFS= read -r comm 2>/dev/null <"$proc/$pid/comm"
  job_candidates=$((job_candidates + 1))
  if [[ $comm =~ $re_job_comm ]]; then
    [ "$pid" -lt "${job_preferred:-99999999999}" ] && job_preferred=$pid
    [ "${#job_pids[@]}" -lt 64 ] && job_pids+=("$pid")
  else
    [ "$pid" -lt "${job_other:-99999999999}" ] && job_other=$pid
  fi
done
job_why="lowest pid of the python/torchrun processes with NCCL or TORCH_NCCL settings"
job_pid=$job_preferred
[ -n "$job_pid" ] || job_why="lowest pid with NCCL or TORCH_NCCL settings (no python/torchrun process has any)"
[ -n "$job_pid" ] || job_pid=$job_other
job_rc=1
if [ -n "$job_pid" ]; then
  job_rc=0
  IFS= read -r job_comm 2>/dev/null <"$proc/$job_pid/comm"
  [[ $job_comm =~ $re_comm ]] || job_comm='?'
  # /proc/<pid>/status has "Uid: real effective saved fs"; files are created with the effective one.
  timeout 5 grep -sm1 -- '^Uid:' "$proc/$job_pid/status" 2>/dev/null | read -r _ _ job_uid _
  [[ $job_uid =~ ^[0-9]{1,10}$ ]] || job_uid=
fi
begin nccl_job
if [ -z "$job_pid" ]; then printf 'none: no process carries NCCL or TORCH_NCCL settings\n'; fi
if [ -n "$job_pid" ]; then printf 'pid=%s uid=%s comm=%s candidates=%s why=%s\n' "$job_pid" "${job_uid:-?}" "$job_comm" "$job_candidates" "$job_why"; fi
end nccl_job "$job_rc"

# One variable of the job's environment, whole (at most 512 bytes): a newline inside the value
# becomes \001 so that the shape checks refuse it rather than use its first line.
job_var() { job_value=; [ -n "$job_pid" ] || return 0; timeout 5 grep -zsm1 -- "^$1=" "$proc/$job_pid/environ" 2>/dev/null | head -c 512 | tr '\n\0' '\001\n' | head -n 1 | IFS= read -r job_value; job_value=${job_value#"$1="}; }

# NCCL RAS (NCCL >= 2.24): a client-only connection to the node-local RAS port asking for STATUS.
# NCCL_RAS_ADDR must be host:port with a host of this node (loopback, or an IPv4 address `ip`
# lists; 0.0.0.0 listens on loopback too) and a port of 1-65535; otherwise nothing is asked.
# The port is compared as a number only after it is known to be digits (bash arithmetic on a
# raw string would run commands), and `--` ends nc's options whatever the words are.
re_host_port='^(localhost|::1|\[::1\]|[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}):([0-9]{1,5})$'
re_cidr='^([0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3})/[0-9]{1,2}$'
own_addrs=' localhost ::1 [::1] 127.0.0.1 0.0.0.0 '
timeout 5 ip -o -4 addr show 2>/dev/null | head -n 256 | while read -r _ _ family cidr _; do
  [ "$family" = inet ] && [[ $cidr =~ $re_cidr ]] && own_addrs+="${BASH_REMATCH[1]} "
done
ras_host=localhost
ras_port=28028
ras_skip=
job_var NCCL_RAS_ADDR
if [ -n "$job_value" ]; then
  ras_skip="skipped: NCCL_RAS_ADDR of pid $job_pid is not host:port of this node (not queried)"
  if [[ $job_value =~ $re_host_port ]] && [[ $own_addrs == *" ${BASH_REMATCH[1]} "* ]]; then
    ras_host=${BASH_REMATCH[1]}
    ras_port=${BASH_REMATCH[2]}
    [ "$ras_host" = 0.0.0.0 ] && ras_host=127.0.0.1
    [ "$ras_host" = '[::1]' ] && ras_host=::1
    [ "$((10#$ras_port))" -ge 1 ] && [ "$((10#$ras_port))" -le 65535 ] && ras_skip=
    ras_port=$((10#$ras_port))
  fi
fi
# The answer comes from whatever listens on that port (any user can): control characters are
# dropped and no line may start with the section marker `@@`.
begin nccl_ras
ras_rc=2
if [ -n "$ras_skip" ]; then printf '%s\n' "$ras_skip"; fi
if [ -z "$ras_skip" ]; then printf 'CLIENT PROTOCOL 2\nSTATUS\n' | timeout 20 nc -w 15 -- "$ras_host" "$ras_port" 2>&1 | tr -d '\000-\010\013-\037\177' | grep -av -- '^@@' | head -c 16777216; ras_rc=${PIPESTATUS[1]}; fi
end nccl_ras "$ras_rc"

# PyTorch Flight Recorder dumps (<prefix><rank>, hang.flight_recorder.DEFAULT_DUMP_PREFIX unless
# TORCH_NCCL_DEBUG_INFO_TEMP_FILE names another plain absolute path), read through the job's root
# (they live in its container). Nothing is read without a job: /proc/1/root/tmp would be the
# host's world-writable /tmp. The walk from the job's root to the prefix's directory steps into
# one component at a time and checks that the directory it stands in is the real directory
# (device and inode) that was listed in the one before, so no link is followed and the files are
# named relative to a directory that cannot be swapped; dd's O_NOFOLLOW refuses a dump that
# became a link after it was listed (O_NONBLOCK: one that became a FIFO cannot stall the read).
# Only regular files with one link (no second name of another file), owned by the job's uid (so
# nothing its user could not read anyway), changed in the last 24 h, named <prefix><rank>, under
# the size cap (thresholds.FLIGHT_RECORDER_MAX_BYTES) are read, the newest
# thresholds.FLIGHT_RECORDER_MAX_FILES of them.
re_rank_name='^[0-9]{1,9}(\.json|\.pkl|\.pickle)?$'
re_mtime='^[0-9]{1,12}(\.[0-9]{1,10})?$'
re_size='^[0-9]{1,9}$'
fr_walk() (
  cd -P -- "$1/" 2>/dev/null || exit 3
  rest=${2#/}
  while [ -n "$rest" ]; do
    part=${rest%%/*}
    rest=${rest#"$part"}
    rest=${rest#/}
    listed=
    here=
    timeout 5 find -P . -mindepth 1 -maxdepth 1 -name "$part" -type d -printf '%D:%i\n' 2>/dev/null | head -n 1 | read -r listed
    [ -n "$listed" ] || exit 1
    cd -P -- "./$part" 2>/dev/null || exit 1
    timeout 5 find -P . -maxdepth 0 -printf '%D:%i\n' 2>/dev/null | read -r here
    [ "$here" = "$listed" ] || exit 1
  done
  timeout 10 find -P . -mindepth 1 -maxdepth 1 -regextype posix-extended -regex "\./${3//./\\.}[0-9]{1,9}(\.json|\.pkl|\.pickle)?" -type f -links 1 -uid "$4" -mmin -1440 -size -32768k -printf '%T@ %s %f\n' 2>/dev/null | sort -rn | head -n 16 | while read -r mtime size name; do
    [[ $mtime =~ $re_mtime ]] && [[ $size =~ $re_size ]] && [[ ${name#"$3"} =~ $re_rank_name ]] || continue
    printf 'file %s %s %s\n' "$mtime" "$size" "$1$2/$name"
    timeout 20 dd if="./$name" iflag=nofollow,nonblock bs=1M count=32 status=none 2>/dev/null | timeout 20 base64 -w 0
    printf '\n'
  done
)
fr_prefix=/tmp/nccl_trace_rank_
fr_skip=
job_var TORCH_NCCL_DEBUG_INFO_TEMP_FILE
if [ -n "$job_value" ] && plain_path "$job_value"; then fr_prefix=$job_value; fi
if [ -n "$job_value" ] && ! plain_path "$job_value"; then fr_skip="skipped: TORCH_NCCL_DEBUG_INFO_TEMP_FILE of pid $job_pid not a plain absolute path (reading the default $fr_prefix)"; fi
begin flight_recorder
fr_rc=1
if [ -z "$job_pid" ]; then printf 'skipped: no NCCL job runs on this node (no Flight Recorder dump to read)\n'; fi
if [ -n "$job_pid" ] && [ -z "$job_uid" ]; then printf 'skipped: the user of pid %s is unknown (no Flight Recorder dump read)\n' "$job_pid"; fi
if [ -n "$fr_skip" ]; then printf '%s\n' "$fr_skip"; fi
if [ -n "$job_uid" ]; then fr_walk "$proc/$job_pid/root" "${fr_prefix%/*}" "${fr_prefix##*/}" "$job_uid"; fr_rc=$?; fi
if [ "$fr_rc" = 1 ] && [ -n "$job_uid" ]; then printf 'skipped: %s is not a directory reached without links in the root of pid %s\n' "${fr_prefix%/*}/" "$job_pid"; fi
if [ "$fr_rc" = 3 ]; then printf 'skipped: the root of pid %s is gone (the process ended)\n' "$job_pid"; fi
end flight_recorder "$fr_rc"

# The job's NCCL_NET_PLUGIN, when it names a file (a plain absolute path): whether that file is there
# in the job's root (only tested, never read). A name (`ofi`, `aws-ofi`) is resolved by NCCL on the
# library path and is only reported. (An absolute link inside the job's root resolves against the
# host's root here, so "present" may be the host's file of that name.)
begin nccl_net_plugin
job_var NCCL_NET_PLUGIN
if [ -z "$job_pid" ]; then printf 'no job\n'; fi
if [ -n "$job_pid" ] && [ -z "$job_value" ]; then printf 'unset\n'; fi
if [ -n "$job_value" ] && [[ $job_value != /* ]] && [[ $job_value =~ ^[A-Za-z0-9._-]{1,64}$ ]]; then printf 'name %s\n' "$job_value"; fi
if [ -n "$job_value" ] && plain_path "$job_value" && [ -f "$proc/$job_pid/root$job_value" ]; then printf 'present %s\n' "$job_value"; fi
if [ -n "$job_value" ] && plain_path "$job_value" && ! [ -f "$proc/$job_pid/root$job_value" ]; then printf 'absent %s\n' "$job_value"; fi
if [ -n "$job_value" ] && ! plain_path "$job_value" && ! [[ $job_value =~ ^[A-Za-z0-9._-]{1,64}$ ]]; then printf 'not a plain path or name\n'; fi
end nccl_net_plugin 0

# Limits that matter are those of the processes that run jobs, not of this SSM shell: memlock, stack
# and open files (soft and hard) of every training process (the python/torchrun ones with NCCL
# settings, lowest pids first, at most 16: a p5 runs 8 ranks and their launcher; else the chosen
# process), slurmd and the container runtime (containers start with its limits unless the runtime
# sets their own), from /proc/<pid>/limits (kernel-written).
re_daemon='^(slurmd|containerd|dockerd)$'
limits_job() {
  limits_comm=
  IFS= read -r limits_comm 2>/dev/null <"$proc/$1/comm"
  [[ $limits_comm =~ $re_comm ]] || limits_comm='?'
  printf 'job %s %s\n' "$1" "$limits_comm"
  timeout 5 grep -sE -- '^Max (locked memory|stack size|open files) ' "$proc/$1/limits" 2>/dev/null
}
begin process_limits
limits_rc=1
if [ "${#job_pids[@]}" -gt 0 ]; then
  printf '%s\n' "${job_pids[@]}" | sort -n | head -n 16 | while read -r limits_pid; do
    [[ $limits_pid =~ $re_pid ]] || continue
    limits_job "$limits_pid"
    limits_rc=0
  done
elif [ -n "$job_pid" ]; then limits_job "$job_pid"; limits_rc=0; fi
timeout 5 ps -eo pid=,comm= 2>/dev/null | grep -E ' (slurmd|containerd|dockerd)$' | head -n 6 | while read -r daemon_pid daemon_comm; do
  [[ $daemon_pid =~ $re_pid ]] && [[ $daemon_comm =~ $re_daemon ]] || continue
  printf 'daemon %s %s\n' "$daemon_pid" "$daemon_comm"
  timeout 5 grep -sE -- '^Max (locked memory|stack size|open files) ' "$proc/$daemon_pid/limits" 2>/dev/null
  limits_rc=0
done
end process_limits "$limits_rc"
