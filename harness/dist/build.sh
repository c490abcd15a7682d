#!/usr/bin/env bash
# Builds a self-contained copy of the suite for hosts without Go (qualification
# hosts rarely have a toolchain): one test binary per conformance package, plus
# test2json and gotestsum, plus run.sh which writes reports/junit.xml and
# reports/test.json exactly like `make conformance`.
#   harness/dist/build.sh <tags> <outdir>
set -euo pipefail
tags="${1-gpu,rdma}"
out="${2:-dist}"
go=${GO:-go}
rm -rf "$out"
mkdir -p "$out/bin"
# -s -w: the copy is for running, not debugging, and must stay small to ship.
ld=(-ldflags=-s\ -w)
for pkg in $($go list ./conformance/...); do
	name=$(basename "$pkg")
	$go test -c -tags "$tags" "${ld[@]}" -o "$out/bin/$name.test" "$pkg"
	# go test -c writes nothing for a package with no tests under these tags.
	[[ -f "$out/bin/$name.test" ]] && echo "$pkg" >"$out/bin/$name.pkg"
done
$go build "${ld[@]}" -o "$out/bin/test2json" cmd/test2json
$go build "${ld[@]}" -o "$out/bin/gotestsum" gotest.tools/gotestsum
cp harness/dist/run.sh harness/dist/run-json.sh "$out/"
echo "built $out (tags $tags): $(cd "$out/bin" && ls *.test | tr '\n' ' ')"
