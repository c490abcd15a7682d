#!/usr/bin/env bash
# Emits go test -json events for every prebuilt test binary (gotestsum reads
# them). GDR_PAIRED_ONLY=1 (rounds.sh, after a host's first round): only the
# binaries that meet a peer (a .paired marker beside them, build.sh).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shopt -s nullglob
bins=("$here"/bin/*.test)
if [[ ${#bins[@]} -eq 0 ]]; then
	echo "run-json.sh: no test binaries in $here/bin" >&2
	exit 1
fi
rc=0
for bin in "${bins[@]}"; do
	[[ ${GDR_PAIRED_ONLY:-0} == 1 && ! -f ${bin%.test}.paired ]] && continue
	pkg=$(cat "${bin%.test}.pkg")
	"$here/bin/test2json" -t -p "$pkg" "$bin" -test.v=test2json -test.count=1 "$@" || rc=1
done
exit $rc
