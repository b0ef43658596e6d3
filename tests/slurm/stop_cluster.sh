#!/usr/bin/env bash
# Stop the one-node test cluster started by tests/slurm/start_cluster.sh (only the daemons whose pid
# files live in its directory). Safe to run when nothing is running.
#
#   tests/slurm/stop_cluster.sh          # stop daemons, keep config/logs for inspection
#   tests/slurm/stop_cluster.sh --purge  # also delete $DEEPNMT_SLURM_DIR
set -uo pipefail

DIR="${DEEPNMT_SLURM_DIR:-/tmp/deepnmt-slurm}"
CONF="$DIR/etc/slurm.conf"
export SLURM_CONF="$CONF"

log() { echo "[stop_cluster] $*" >&2; }

stop_pidfile() {
    local name=$1 pidfile=$2 pid
    [[ -f $pidfile ]] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name ($pid) ignored SIGTERM; killing"
            kill -KILL "$pid" 2>/dev/null
        fi
    fi
    rm -f "$pidfile"
}

if [[ -f $CONF ]] && command -v scancel >/dev/null; then
    # Kill running test jobs first so slurmd does not leave orphans behind.
    scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
    sleep 0.5
fi
stop_pidfile slurmd "$DIR/run/slurmd.pid"
stop_pidfile slurmctld "$DIR/run/slurmctld.pid"
stop_pidfile munged "$DIR/run/munged.pid"

if [[ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" == "$CONF" ]]; then
    rm -f /etc/slurm/slurm.conf
fi
if [[ "${1:-}" == "--purge" ]]; then
    rm -rf "$DIR"
fi
log "stopped"
