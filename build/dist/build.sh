#!/usr/bin/env bash
# Builds a self-contained copy of the suite for hosts without Go (qualification
# hosts rarely have a toolchain): one test binary per conformance package, plus
# test2json, gotestsum and gdrreport, plus run.sh which writes the same
# reports/ as `make conformance` (junit.xml, summary.txt/md/json, report.html,
# test.json, host.json), plus gdrcluster, rounds.sh and gdrconf.sbatch for N
# hosts under Slurm or Kubernetes. mgpu-evidence.sh and mgpu-compare.cu ride
# along: on a multi-GPU host, mgpu-evidence.sh <dir> runs the suite and the copy
# benchmarks next to the same figures through the CUDA runtime.
#   build/dist/build.sh <tags> <outdir>
#   ARCH=arm64 build/dist/build.sh <tags> <outdir>   for another architecture
# ARCH (a GOARCH: amd64 or arm64, default this host's) cross-compiles with
# Debian's <triplet>-gcc (make dist ARCH=arm64 installs it: build/deps.sh).
# The dist records its architecture in ARCH; run.sh refuses another host's.
set -euo pipefail
tags="${1-gpu,rdma}"
out="${2:-dist}"
go=${GO:-go}
here="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=build/arch.sh
source "$here/arch.sh"
arch="$(arch_goarch "${ARCH:-$(arch_native)}")"
cross_cc=$(arch_cc "$arch")
export GOARCH="$arch"
if [[ -n "$cross_cc" ]]; then
	export CC="$cross_cc" CGO_ENABLED=1
fi
rm -rf "$out"
mkdir -p "$out/bin"
echo "$arch" >"$out/ARCH"
# -s -w: the copy is for running, not debugging, and must stay small to ship.
ld=(-ldflags=-s\ -w)
for pkg in $($go list ./conformance/...); do
	name=$(basename "$pkg")
	$go test -c -tags "$tags" "${ld[@]}" -o "$out/bin/$name.test" "$pkg"
	# go test -c writes nothing for a package with no tests under these tags.
	[[ -f "$out/bin/$name.test" ]] && echo "$pkg" >"$out/bin/$name.pkg"
	# The packages that meet a peer (pingpong): a cluster run's later
	# rounds run only these (run-json.sh, GDR_PAIRED_ONLY); the others
	# judge the host alone, and once is enough.
	[[ -f "$out/bin/$name.test" && $name == pingpong ]] && : >"$out/bin/$name.paired"
done
# Static: only the test binaries need the host's glibc (cgo), and that
# floor is the build host's (docs/developing.md, "Which glibc the dist needs").
CGO_ENABLED=0 $go build "${ld[@]}" -o "$out/bin/test2json" cmd/test2json
CGO_ENABLED=0 $go build "${ld[@]}" -o "$out/bin/gotestsum" gotest.tools/gotestsum
# Static, so it runs on any Linux of the same architecture; the version is
# linked in for builds whose build info has no VCS revision (worktrees).
CGO_ENABLED=0 $go build -buildvcs=auto -ldflags "-s -w ${REPORT_LDFLAGS:-}" -o "$out/bin/gdrreport" ./cmd/gdrreport
# The N-host run (docs/clusters.md): the planner beside rounds.sh, and the
# batch script, so that a cluster without Go runs srun -N<n> dist/run.sh.
CGO_ENABLED=0 $go build -ldflags "-s -w" -o "$out/gdrcluster" ./cmd/gdrcluster
cp build/dist/run.sh build/dist/run-json.sh build/dist/mgpu-evidence.sh build/dist/mgpu-compare.cu "$out/"
cp deploy/rounds.sh deploy/slurm/gdrconf.sbatch "$out/"
echo "built $out ($arch, tags $tags): $(cd "$out/bin" && ls *.test | tr '\n' ' ')"
