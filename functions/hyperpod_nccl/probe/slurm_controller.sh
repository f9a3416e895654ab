# hyperpod-nccl Slurm controller probe (read-only). Same section format as node_probe.sh.
# No value read at run time is ever a command's argument here. Job names (any user's) and node
# reasons are free text: control characters are dropped from them (a newline stays a row end).
# No real captured output of the munge, nccl_env_files and remove_ipc sections has been seen
# (tests/data/probe/README.md, "Sections with no real sample").
export LC_ALL=C
export PATH="$PATH:/opt/slurm/bin:/usr/local/bin:/usr/sbin:/sbin"
begin() { printf '@@BEGIN %s\n' "$1"; }
end() { printf '@@END %s rc=%s\n' "$1" "$2"; }

# slurmctld may be between two answers (a restart, a failover): asked up to 3 times, 3 s apart,
# each answer after an "attempt N" line (the parser reads the last one).
begin slurm_ping
ping_rc=1
for attempt in 1 2 3; do
  printf 'attempt %s\n' "$attempt"
  timeout 15 scontrol ping 2>&1 | tr -d '\000-\010\013-\037\177' | head -n 20
  ping_rc=${PIPESTATUS[0]}
  [ "$ping_rc" = 0 ] && break
  [ "$attempt" = 3 ] || timeout 5 sleep 3
done
end slurm_ping "$ping_rc"

begin munge
timeout 5 systemctl is-active munge 2>&1
end munge "$?"

# `-h -o` rows, not `sinfo --json`: a real `sinfo -N --json` entry is ~4.4 KB per node and partition
# (~9 MB a sweep for 1,000 nodes in 2 partitions, through one SSM session) against ~60 bytes a row;
# `scontrol show node --oneliner` is hundreds of bytes a node and spells states otherwise (IDLE+DRAIN).
begin sinfo
timeout 15 sinfo -N -h -o '%N|%n|%o|%T|%E' 2>&1 | tr -d '\000-\010\013-\037\177'
end sinfo "${PIPESTATUS[0]}"

# No real output in these `-h -o` forms is public: every sinfo/squeue fixture is a rewritten row.
begin squeue
timeout 15 squeue -h -t PENDING,COMPLETING -o '%i|%j|%T|%R' 2>&1 | tr -d '\000-\010\013-\037\177' | head -n 50
end squeue "${PIPESTATUS[0]}"

begin nccl_env_files
timeout 5 grep -rHE -- '^[[:space:]]*(export[[:space:]]+)?(NCCL_|FI_|TORCH_NCCL_)[A-Z_]*=' /etc/profile.d/nccl.sh /opt/ml/config/nccl.conf /etc/slurm/prolog.d/ /opt/slurm/etc/prolog.d/ 2>&1 | head -n 30
end nccl_env_files "${PIPESTATUS[0]}"

begin remove_ipc
timeout 5 grep -rhE -- '^[[:space:]]*RemoveIPC' /etc/systemd/logind.conf /etc/systemd/logind.conf.d/ 2>&1
end remove_ipc "$?"
