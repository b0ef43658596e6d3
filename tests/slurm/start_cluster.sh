#!/usr/bin/env bash
# Start a real one-node SLURM cluster (munged + slurmctld + slurmd) on this host, for the slurm tests.
#
#   tests/slurm/start_cluster.sh            # install if needed, configure, start, wait until idle
#   source <(tests/slurm/start_cluster.sh --print-env)   # export SLURM_CONF in the current shell
#
# Everything it writes lives under $DEEPNMT_SLURM_DIR (default /tmp/deepnmt-slurm): slurm.conf,
# the munge key and socket, daemon state, pid and log files. Running it again on a running cluster
# only checks that the node is up. tests/slurm/stop_cluster.sh stops it.
#
# Needs root (daemons, apt). Debian/Ubuntu: installs slurm-wlm + munge with apt when missing.
#
# Environment:
#   DEEPNMT_SLURM_DIR        state/config dir (default /tmp/deepnmt-slurm)
#   DEEPNMT_SLURM_PARTITION  partition name (default debug)
#   DEEPNMT_SLURM_TIMEOUT    seconds to wait for the node to become idle (default 90)
set -euo pipefail

DIR="${DEEPNMT_SLURM_DIR:-/tmp/deepnmt-slurm}"
PARTITION="${DEEPNMT_SLURM_PARTITION:-debug}"
TIMEOUT="${DEEPNMT_SLURM_TIMEOUT:-90}"
CONF="$DIR/etc/slurm.conf"
MUNGE_SOCKET="$DIR/munge/munge.socket.2"

if [[ "${1:-}" == "--print-env" ]]; then
    echo "export SLURM_CONF=$CONF"
    exit 0
fi

log() { echo "[start_cluster] $*" >&2; }
die() {
    echo "[start_cluster] ERROR: $*" >&2
    exit 1
}

export SLURM_CONF="$CONF"

# ---------------------------------------------------------------- packages
need_install=()
command -v slurmctld >/dev/null 2>&1 || need_install+=(slurm-wlm)
command -v sbatch >/dev/null 2>&1 || need_install+=(slurm-client)
command -v munged >/dev/null 2>&1 || need_install+=(munge)
if ((${#need_install[@]})); then
    [[ $(id -u) -eq 0 ]] || die "packages missing (${need_install[*]}) and not root: cannot apt-get install"
    command -v apt-get >/dev/null || die "packages missing (${need_install[*]}) and no apt-get on this system"
    log "installing slurm-wlm munge with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # policy-rc.d keeps the packages' own init scripts from starting system daemons
    # (we start our own, with our config); it is removed again right after.
    policy=/usr/sbin/policy-rc.d
    made_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
    fi
    apt-get install -y -qq --no-install-recommends slurm-wlm slurm-client munge >/dev/null
    ((made_policy)) && rm -f "$policy"
fi
[[ $(id -u) -eq 0 ]] || die "starting slurmctld/slurmd needs root"

# ---------------------------------------------------------------- already running?
pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

node_state() { sinfo -h -N -o '%t' 2>/dev/null | head -n1 | tr -d '*~#$@%!^-'; }

if pid_alive "$DIR/run/munged.pid" && pid_alive "$DIR/run/slurmctld.pid" && pid_alive "$DIR/run/slurmd.pid"; then
    state=$(node_state || true)
    case "$state" in
        idle | mix | alloc | comp)
            log "cluster already running (node $state)"
            exit 0
            ;;
    esac
    log "daemons running but node state is '${state:-unknown}'; restarting"
    "$(dirname "$0")/stop_cluster.sh"
fi

# ---------------------------------------------------------------- config
mkdir -p "$DIR"/{etc,munge,run,log,state/ctld,state/d}
chmod 700 "$DIR/munge"

host=$(hostname -s)
cpus=$(nproc)
mem_total=$(free -m | awk '/^Mem:/ {print $2}')
# Leave headroom: slurmd drains a node whose configured memory exceeds what it finds.
real_mem=$((mem_total * 9 / 10))

cat >"$CONF" <<EOF
# One-node test cluster written by tests/slurm/start_cluster.sh. Do not use in production.
ClusterName=deepnmt
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$DIR/state/ctld
SlurmdSpoolDir=$DIR/state/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: plain process tracking, no task binding (works in containers and CI VMs).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# No accounting database: sacct cannot see jobs, status queries go through squeue.
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
# Trust the node description below rather than the probed hardware.
SlurmdParameters=config_overrides
ReturnToService=2
# Short timeouts: a test cluster should react in seconds. MinJobAge keeps finished jobs visible to
# squeue long enough for Snakemake's status checks (its plugin wants >= 3x its first check interval).
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
InactiveLimit=0
KillWait=15
MinJobAge=300
# Reject at submission what the partition can never run (e.g. 2 nodes here) instead of queueing it.
EnforcePartLimits=ALL
MailProg=/bin/true
Waittime=0
# Declared so that jobs asking for GPUs get a clean "not available" instead of a parse error.
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$real_mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF

# Clients that do not inherit SLURM_CONF (a login shell, Snakemake started by hand) still find the
# cluster through the system default path, unless that path belongs to someone else's config.
sys_conf=/etc/slurm/slurm.conf
mkdir -p /etc/slurm
if [[ ! -e $sys_conf && ! -L $sys_conf ]] || [[ "$(readlink "$sys_conf" 2>/dev/null)" == "$CONF" ]]; then
    ln -sfn "$CONF" "$sys_conf"
else
    log "leaving existing $sys_conf alone; export SLURM_CONF=$CONF to reach the test cluster"
fi

# ---------------------------------------------------------------- munge
key="$DIR/munge/munge.key"
if [[ ! -s $key ]]; then
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile="$key" --force
    else
        dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
    fi
fi
chmod 400 "$key"
if ! pid_alive "$DIR/run/munged.pid"; then
    rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
    munged --force --key-file="$key" --socket="$MUNGE_SOCKET" --pid-file="$DIR/run/munged.pid" \
        --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
fi
for _ in $(seq 50); do
    [[ -S $MUNGE_SOCKET ]] && break
    sleep 0.1
done
munge -n -S "$MUNGE_SOCKET" | unmunge -S "$MUNGE_SOCKET" >/dev/null || die "munge does not work; see $DIR/log/munged.log"

# ---------------------------------------------------------------- slurm daemons
# -c: start from a clean job state; this is a throw-away cluster and stale jobs would confuse tests.
pid_alive "$DIR/run/slurmctld.pid" || slurmctld -c -f "$CONF"
pid_alive "$DIR/run/slurmd.pid" || slurmd -f "$CONF"

start=$SECONDS
while true; do
    state=$(node_state || true)
    case "$state" in
        idle | mix | alloc) break ;;
    esac
    if ((SECONDS - start > TIMEOUT)); then
        log "node never became idle (state '${state:-none}'). Last log lines:"
        tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
        sinfo -N -l >&2 || true
        die "cluster did not come up within ${TIMEOUT}s"
    fi
    # A node left DOWN by an earlier run comes back once slurmd has registered.
    if [[ $state == down || $state == drain ]]; then
        scontrol update NodeName="$host" State=RESUME 2>/dev/null || true
    fi
    sleep 0.5
done
log "cluster up: node $host ($cpus CPUs, ${real_mem} MB), partition $PARTITION, SLURM_CONF=$CONF"
