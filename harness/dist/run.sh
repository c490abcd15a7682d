#!/usr/bin/env bash
# Runs the prebuilt suite (see build.sh) and writes the same reports/ as
# `make conformance`: test.json, then host.json and junit.xml, summary.txt
# (printed), summary.md, summary.json and report.html from gdrreport, whose
# exit status (the verdict's) is this script's. Extra arguments go to every
# test binary (e.g. -test.run X). GDR_REPORTS names another report folder;
# GDR_REPORT_HOST names the host in the report (default: its hostname).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
reports="${GDR_REPORTS:-$PWD/reports}"
mkdir -p "$reports"
rm -f "$reports/test.json" "$reports/host.json"
rc=0
"$here/bin/gotestsum" --format testname --jsonfile "$reports/test.json" --raw-command -- "$here/run-json.sh" "$@" || rc=$?
exec "$here/bin/gdrreport" -collect -go-exit "$rc" ${GDR_REPORT_HOST:+-host "$GDR_REPORT_HOST"} "$reports"
