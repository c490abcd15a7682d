#!/usr/bin/env bash
# Runs the prebuilt suite (see build.sh) and writes the same reports/ as
# `make conformance`: test.json, then host.json and junit.xml, summary.txt
# (printed), summary.md, summary.json and report.html from gdrreport, whose
# exit status (the verdict's) is this script's. In a round of a cluster run
# (GDR_PLAN set by rounds.sh) the round keeps test.json.gz, host.json,
# summary.txt and exit-code (gdrreport -compact). Extra arguments go to every
# test binary (e.g. -test.run X). GDR_REPORTS names another report folder;
# GDR_REPORT_HOST names the host in the report (default: its hostname).
# GDR_SOAK=<duration> (2h) adds the soak: conformance/soak keeps every rail
# and GPU busy that long and writes reports/soak.json as it goes (a test
# binary has no default timeout, so a long soak runs to its end).
# GDR_SIGN_KEY (a PEM private key) makes gdrreport write the signed
# evidence bundle reports/evidence.tar.gz, recording the SHA-256 of every
# test binary that ran (README, "Verifying an evidence bundle").
#
# Under srun with one task per node on several nodes
# (srun -N<n> --ntasks-per-node=1 dist/run.sh) every task runs the pairing
# schedule instead: rounds.sh beside this script, which calls this script
# back for each round with the round's plan (GDR_PLAN) set. GDR_REPORTS is
# then the shared folder (default: reports/ here, which must be on a file
# system every node mounts) and GDR_CLUSTER_SECRET must be set
# (docs/clusters.md).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# A dist runs on the architecture it was built for (make dist ARCH=...):
# another one's binaries fail with "cannot execute binary file", which
# reads as a broken suite; say which copy this host needs instead.
if [[ -f "$here/ARCH" ]]; then
	built=$(<"$here/ARCH")
	case "$(uname -m)" in
	x86_64) host=amd64 ;;
	aarch64 | arm64) host=arm64 ;;
	*) host=$(uname -m) ;;
	esac
	if [[ "$built" != "$host" ]]; then
		echo "run.sh: this copy of the suite is built for $built; this host is $host (uname -m $(uname -m)): build it with make dist ARCH=$host" >&2
		exit 2
	fi
fi
tasks="${SLURM_STEP_NUM_TASKS:-1}"
if [[ -z "${GDR_PLAN:-}" && "$tasks" =~ ^[0-9]+$ ]] && ((10#$tasks > 1)); then
	export GDR_REPORTS="${GDR_REPORTS:-$PWD/reports}"
	exec "$here/rounds.sh" "$@"
fi
reports="${GDR_REPORTS:-$PWD/reports}"
mkdir -p "$reports"
# The soak (conformance/soak, when GDR_SOAK is set) writes its series here
# as it runs.
export GDR_REPORTS="$reports"
rm -f "$reports/test.json" "$reports/test.json.partial" "$reports/host.json" "$reports/soak.json"
rc=0
# The events go to test.json.partial and become test.json when the run
# ends: a reader on another host (a cluster's merge) never takes half a run
# for a whole one, and a node that dies leaves the partial file, judged as a
# run that did not end.
# SIGTERM (Slurm signals every process of the step at once; its SIGKILL
# follows KillWait later) or Ctrl-C ends gotestsum and test2json at once:
# this script goes on, waits a little for a soak to save its cut series,
# keeps the events as a run that did not end, and still writes the report.
stopped=
trap 'stopped=SIGTERM' TERM
trap 'stopped=SIGINT' INT
"$here/bin/gotestsum" --format testname --jsonfile "$reports/test.json.partial" --raw-command -- "$here/run-json.sh" "$@" || rc=$?
trap - TERM INT
if [[ -n "$stopped" ]]; then
	echo "run.sh: $stopped: the run was stopped; the report judges what it measured" >&2
	# At most 10 s for the test binaries to end (a soak saves its cut
	# series at once; SIGKILL comes after Slurm's KillWait, 30 s unless set).
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		alive=
		for c in /proc/[0-9]*/cmdline; do
			arg0=
			read -r -d '' arg0 2>/dev/null <"$c"
			[[ "$arg0" == "$here"/bin/*.test ]] && alive=1 && break
		done
		[[ -n "$alive" ]] || break
		sleep 1
	done
	[ "$rc" -ne 0 ] || rc=1
elif ! mv -f "$reports/test.json.partial" "$reports/test.json"; then
	echo "run.sh: no $reports/test.json.partial to keep: gotestsum wrote no events" >&2
	[ "$rc" -ne 0 ] || rc=1
fi
export GDR_EVIDENCE_BINARIES="${GDR_EVIDENCE_BINARIES:-$(printf '%s:' "$here"/bin/*.test)}"
# A round of a cluster run (rounds.sh set GDR_PLAN) lives on the shared
# folder beside every other host's rounds: -compact keeps its events as
# test.json.gz (about 40x smaller, every attribute and result kept) and
# writes summary.txt and exit-code only; the merge renders every format.
exec "$here/bin/gdrreport" -collect ${GDR_PLAN:+-compact} -go-exit "$rc" ${stopped:+-stopped "$stopped"} ${GDR_REPORT_HOST:+-host "$GDR_REPORT_HOST"} "$reports"
