#!/usr/bin/env bash
# Runs a command that makes a report (make conformance, make report ...) and
# exits with the verdict's own code (README's exit status table): GNU make
# exits 2 for any failed recipe, which is also gdrreport's "the report could
# not be made", so make's status cannot tell NOT QUALIFIED (1) or INCOMPLETE
# under GDR_STRICT=1 (3) from a broken run. gdrreport writes its exit status
# to $GDR_EXIT_CODE_FILE; when the command made no report (a build failed
# first), the command's own status is returned.
#   build/verdict.sh make conformance
#   build/verdict.sh make report IN=all-hosts OUT=reports/cluster
set -uo pipefail
if (($# == 0)); then
	echo "usage: build/verdict.sh COMMAND [ARG...]   (e.g. build/verdict.sh make conformance)" >&2
	exit 2
fi
f="$(mktemp)" || exit 2
trap 'rm -f "$f"' EXIT
GDR_EXIT_CODE_FILE="$f" "$@"
rc=$?
code="$(tr -d '[:space:]' <"$f")"
if [[ "$code" =~ ^[0-9]+$ ]]; then
	exit "$code"
fi
exit "$rc"
