#!/usr/bin/env bash
# One task of an N-host run: every round of the pairing schedule, then exit.
# Slurm starts it (srun -N<n> --ntasks-per-node=1 dist/rounds.sh, or
# dist/run.sh, which comes here under such an srun), or it is the container
# command of the Indexed Job (deploy/k8s). It starts no other host.
# Arguments go to the suite (e.g. -test.run X). Test failures land in the
# reports; the exit status is non-zero only when the harness itself broke.
#   GDR_REPORTS        the shared folder (required)
#   GDR_SUITE          the suite command (default: run.sh beside this script (make dist
#                      copies it there), else dist/run.sh beside it or in its parent)
#   GDRCLUSTER         the gdrcluster binary (default: beside this script, else on PATH)
#   GDR_ROUND_TIMEOUT  how long to wait for the other hosts after a round (default 30m)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gdrcluster="${GDRCLUSTER:-$here/gdrcluster}"
[ -x "$gdrcluster" ] || gdrcluster="$(command -v gdrcluster)" || { echo "rounds.sh: no gdrcluster beside $0 or on PATH (set GDRCLUSTER)" >&2; exit 1; }
suite="${GDR_SUITE:-}"
if [ -z "$suite" ]; then # an image's /opt/gdrconf/dist, or a checkout's dist/ after make dist
	for s in "$here/run.sh" "$here/dist/run.sh" "$here/../dist/run.sh"; do [ -x "$s" ] && suite="$s" && break; done
	[ -n "$suite" ] || { echo "rounds.sh: no run.sh or dist/run.sh beside or above $here (make dist, or set GDR_SUITE)" >&2; exit 1; }
fi
root="${GDR_REPORTS:?rounds.sh: GDR_REPORTS must name the shared reports folder}"
k=0
while :; do
	plan="$(GDR_REPORTS="$root" "$gdrcluster" plan -round "$k")" || exit 1
	eval "$plan"
	case "$GDR_PLAN" in
	done) break ;;
	run)
		# dist/run.sh writes junit.xml and test.json into GDR_REPORTS.
		GDR_REPORTS="$GDR_ROUND_REPORTS" "$suite" "$@" || echo "rounds.sh: round $k: the suite reported failures (see $GDR_ROUND_REPORTS)" >&2
		;;
	esac
	GDR_REPORTS="$root" "$gdrcluster" done -round "$k" || exit 1
	GDR_REPORTS="$root" "$gdrcluster" wait -round "$k" -timeout "${GDR_ROUND_TIMEOUT:-30m}" ||
		echo "rounds.sh: round $k: going on without the hosts above (their pairs count as failed)" >&2
	k=$((k + 1))
done
