#!/usr/bin/env bash
# One task of an N-host run: the start barrier, every round of the pairing
# schedule, then exit.
# Slurm starts it (srun -N<n> --ntasks-per-node=1 dist/rounds.sh, or
# dist/run.sh, which comes here under such an srun), or it is the container
# command of the Indexed Job (deploy/k8s). It starts no other host.
# Arguments go to the suite (e.g. -test.run X). Test failures land in the
# reports. The exit status is non-zero when the harness itself broke, 4 when
# this host came too late (a barrier closed without it: the run goes on
# without it), 143 or 130 when SIGTERM or SIGINT stopped it (the running
# round's suite still wrote its report), and, in the task that merges
# (GDR_MERGE), the merged verdict's.
#   GDR_REPORTS        the shared folder (required)
#   GDR_SUITE          the suite command (default: run.sh beside this script (make dist
#                      copies it there), else dist/run.sh beside it or in its parent)
#   GDRCLUSTER         the gdrcluster binary (default: beside this script, else on PATH)
#   GDR_START_TIMEOUT  how long to wait for every host before round 0 (default 15m);
#                      hosts not there then did not start, the others are paired
#   GDR_ROUND_TIMEOUT  how long to wait for the other hosts after a round (default 30m;
#                      sooner for hosts whose heartbeat stood still for 3 min)
#   GDR_MERGE          first: the task first in the job's host list (Kubernetes: index
#                      0) merges every host's rounds after the last one into
#                      GDR_REPORTS/report and exits with the verdict's code (0
#                      QUALIFIED, 1 NOT QUALIFIED, 3 INCOMPLETE under GDR_STRICT=1,
#                      2 no report); where that host did not start or stopped, the
#                      next one in the list that ran to the end does (GDR_MERGE_HOST);
#                      unset: no task merges (the Slurm batch script does)
# A host runs the whole suite in its first round and only the packages that
# meet a peer (pingpong) after it (GDR_PAIRED_ONLY, run-json.sh): the
# single-host checks (install, topology, the GPU copies, memory
# registration) say the same in every round, and the GPU copies take
# minutes on an 8-GPU host. The merge reads every round of a host as one run.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gdrcluster="${GDRCLUSTER:-$here/gdrcluster}"
[ -x "$gdrcluster" ] || gdrcluster="$(command -v gdrcluster)" || { echo "rounds.sh: no gdrcluster beside $0 or on PATH (set GDRCLUSTER)" >&2; exit 1; }
suite="${GDR_SUITE:-}"
if [ -z "$suite" ]; then # an image's /opt/gdrconf/dist, or a checkout's dist/ after make dist
	for s in "$here/run.sh" "$here/dist/run.sh" "$here/../dist/run.sh"; do [ -x "$s" ] && suite="$s" && break; done
	[ -n "$suite" ] || { echo "rounds.sh: no run.sh or dist/run.sh beside or above $here (make dist, or set GDR_SUITE)" >&2; exit 1; }
fi
case "${GDR_MERGE:-}" in
'' | first) ;;
*) echo "rounds.sh: GDR_MERGE=$GDR_MERGE is not valid: want first, or unset" >&2; exit 1 ;;
esac
root="${GDR_REPORTS:?rounds.sh: GDR_REPORTS must name the shared reports folder}"
# SIGTERM (Kubernetes deleting the pod, Slurm's scancel or time limit) and
# SIGINT (Ctrl-C) stop the task: the running command hears the signal (the
# suite, which still writes its round's report: run.sh traps both), no
# further round starts, and the task exits 143 or 130 once that command
# ended. As the Job's container command this script is PID 1 of the pod's
# PID namespace: the kernel drops a signal whose handler is the default for
# such a process (kernel/signal.c, sig_task_ignored and SIGNAL_UNKILLABLE,
# by reading), and when it exits the kernel kills every other process of
# the namespace. Untrapped, the kubelet's SIGTERM was lost (or, once bash
# catches TERM for the EXIT trap alone, ended this script at once: seen
# under unshare -pf, bash 5.2), and the suite died without its report.
# The kubelet signals the container's main process only (Kubernetes docs,
# "Termination of Pods", by reading): the signal goes on to the command's
# process group, every process of the suite, as scancel signals every
# process of a Slurm step (there a second TERM is harmless: run.sh and the
# soak take any number; gotestsum ends at the first).
stopped=
child=
on_signal() {
	stopped=$1
	[ -z "$child" ] || kill -s "$1" -- "-$child" 2>/dev/null
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
# run_cmd COMMAND... runs it in the background, in a process group of its
# own (set -m), and waits for it: bash runs a trap only once a foreground
# command ended, and a wait returns at once. It returns the command's
# status; once the task was stopped it runs nothing.
run_cmd() {
	[ -z "$stopped" ] || return 1
	set -m
	"$@" &
	child=$!
	set +m
	[ -z "$stopped" ] || kill -s "$stopped" -- "-$child" 2>/dev/null # the signal came before child was set
	local rc
	while :; do
		wait "$child"
		rc=$?
		# A wait the trap cut short returns >128 while the command runs
		# on (or is not yet reaped): wait again, for its own status.
		[ "$rc" -gt 128 ] && kill -0 "$child" 2>/dev/null && continue
		break
	done
	child=
	return "$rc"
}
# stop_if_stopped ends the task after a signal, with the shell's status
# for it.
stop_if_stopped() {
	[ -n "$stopped" ] || return 0
	echo "rounds.sh: SIG$stopped: the task stopped$1; no further round" >&2
	[ "$stopped" = INT ] && exit 130
	exit 143
}
# A folder of this task's own for the plans (they come back through a file:
# the command runs in the background). mkdir, not mktemp: the lab's and the
# image's busybox have no mktemp; mkdir fails where the name is taken.
tmp="${TMPDIR:-/tmp}/gdrconf-rounds.$$"
mkdir -m 700 "$tmp" || { echo "rounds.sh: cannot make $tmp for the round plans" >&2; exit 1; }
trap 'rm -rf "$tmp"' EXIT
# This host's NVLink domain (GB200/GB300 NVL72), which gdrcluster start
# publishes so that the planner pairs across domains (docs/clusters.md):
# NVML's fabric info as the suite's GPU-16 reads it, run alone here (the
# suite holds the one NVML reader; gdrcluster is static and loads none).
# No GPU test binary, no GPU, no driver or no domain: none is published and
# the host pairs as before; its status is not the run's.
bin="$(dirname "$suite")/bin"
identity=()
if [ -x "$bin/gpu.test" ] && [ -x "$bin/test2json" ]; then
	run_cmd "$bin/test2json" -t -p gpu "$bin/gpu.test" -test.v=test2json -test.count=1 -test.timeout 2m -test.run '^TestGPU16Identity$' >"$tmp/identity.json" 2>/dev/null
	stop_if_stopped " reading its NVLink domain"
	identity=(-identity "$tmp/identity.json")
fi
# The start barrier: image pulls and node boots skew a large fleet's start
# by minutes, and a round-0 partner that is not there yet would fail its
# pair. 4: this host came after the barrier closed; it stops here.
run_cmd "$gdrcluster" start ${identity[@]+"${identity[@]}"}
rc=$?
stop_if_stopped " at the start barrier"
[ "$rc" = 0 ] || exit "$rc"
# The heartbeat lets a round's barrier stop waiting for a host that died
# (gdrcluster wait); it ends with this script.
"$gdrcluster" heartbeat &
beat=$!
trap 'kill "$beat" 2>/dev/null; rm -rf "$tmp"' EXIT
k=0
ran=0
while :; do
	# In the background too: a re-pairing round's plan waits for the lead's.
	run_cmd "$gdrcluster" plan -round "$k" >"$tmp/plan"
	rc=$?
	stop_if_stopped " planning round $k"
	[ "$rc" = 0 ] || exit 1
	eval "$(<"$tmp/plan")"
	case "$GDR_PLAN" in
	done) break ;;
	run)
		# The soak (GDR_SOAK) runs in a host's first round only where that is
		# round 0 (both ends of every pair start it together): plan decides
		# it with the suite's own parser of GDR_SOAK (GDR_PLAN_SOAK_SKIP).
		soak=()
		[ -n "$GDR_PLAN_SOAK_SKIP" ] && soak=(GDR_SOAK=0 "GDR_SOAK_SKIP=$GDR_PLAN_SOAK_SKIP")
		# dist/run.sh keeps the round small on the shared folder: test.json.gz,
		# host.json, summary.txt and exit-code in GDR_REPORTS (gdrreport -compact).
		run_cmd env ${soak[@]+"${soak[@]}"} GDR_PAIRED_ONLY=$ran GDR_REPORTS="$GDR_ROUND_REPORTS" "$suite" "$@" || [ -n "$stopped" ] || echo "rounds.sh: round $k: the suite reported failures (see $GDR_ROUND_REPORTS)" >&2
		# Stopped: the round is not done (the others' barriers go on
		# without this host once its heartbeat stands still).
		stop_if_stopped " in round $k, its report in $GDR_ROUND_REPORTS"
		ran=1
		;;
	esac
	run_cmd "$gdrcluster" done -round "$k"
	rc=$?
	stop_if_stopped " after round $k"
	[ "$rc" = 0 ] || exit 1
	# Hosts that had not finished when the barrier closed stopped in this
	# round (gdrcluster says which); the next plans go around them.
	run_cmd "$gdrcluster" wait -round "$k"
	rc=$?
	stop_if_stopped " at round $k's barrier"
	case $rc in
	0) ;;
	4) exit 4 ;; # this host came too late: the others went on without it
	*)
		echo "rounds.sh: round $k: the barrier failed (exit $rc)" >&2
		exit 1
		;;
	esac
	k=$((k + 1))
done
[ "${GDR_MERGE:-}" = first ] && [ "$GDR_HOST_NAME" = "${GDR_MERGE_HOST:-}" ] || exit 0
# The merge: every task passed (or waited out) the last round's barrier, so
# every host's results are in. gdrreport sits in the suite's bin/. A signal
# now lets the merge (seconds) finish and exit with its verdict.
report="${GDR_REPORT_BIN:-$(dirname "$suite")/bin/gdrreport}"
[ -x "$report" ] || report="$(command -v gdrreport)" || { echo "rounds.sh: no gdrreport beside $suite or on PATH (set GDR_REPORT_BIN)" >&2; exit 2; }
GDR_REPORTS="$root" "$gdrcluster" isolate -reports "$root" | tee "$root/isolate.txt"
GDR_REPORTS="$root" "$gdrcluster" isolate -json -reports "$root" >"$root/isolate.json"
"$report" -q -run "$GDR_RUN" -out "$root/report" "$root"
rc=$?
echo "rounds.sh: cluster verdict in $root/report/summary.txt (exit $rc)"
exit "$rc"
