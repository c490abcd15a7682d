#!/usr/bin/env bash
# Runs the prebuilt suite (see build.sh) and writes reports/junit.xml and
# reports/test.json. Extra arguments go to every test binary (e.g. -test.run X).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
reports="${GDR_REPORTS:-$PWD/reports}"
mkdir -p "$reports"
"$here/bin/gotestsum" --format testname --junitfile "$reports/junit.xml" \
	--jsonfile "$reports/test.json" --raw-command -- "$here/run-json.sh" "$@"
