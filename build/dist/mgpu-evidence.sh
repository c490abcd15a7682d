#!/usr/bin/env bash
# Multi-GPU evidence on a GPU host (GPU-12..15): the whole suite (run.sh,
# which includes them), its copy benchmarks, and mgpu-compare (the same
# figures through the CUDA runtime, built here with nvcc) before and after
# the suite, all in one call, into <outdir>:
#   env.txt            nvidia-smi: GPUs, topo -m, topo -p2p r, nvlink -s, fabric state
#   compare-before.txt mgpu-compare's lines (see mgpu-compare.cu)
#   reports/           run.sh's reports (test.json, host.json, junit.xml, summary.*, report.html)
#   bench.txt          gpu.test -test.bench 'Copy' -test.benchtime 20x (what make bench runs)
#   compare-after.txt  mgpu-compare again
#   exit.txt           each step's exit status
#   dist/mgpu-evidence.sh <outdir>      (NVCC=... names another nvcc)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: mgpu-evidence.sh <outdir>}"
mkdir -p "$out"
: >"$out/exit.txt"
step() { local name=$1; shift; "$@"; echo "$name $?" >>"$out/exit.txt"; }

{
	date -u +%FT%TZ
	uname -r
	nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version --format=csv
	nvidia-smi topo -m
	nvidia-smi topo -p2p r
	nvidia-smi nvlink -s
	nvidia-smi -q | grep -i -A2 fabric
} >"$out/env.txt" 2>&1

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
nvcc="${NVCC:-nvcc}"
command -v "$nvcc" >/dev/null 2>&1 || nvcc=/usr/local/cuda/bin/nvcc
if step nvcc "$nvcc" -O2 -o "$tmp/mgpu-compare" "$here/mgpu-compare.cu" 2>"$out/nvcc.txt"; [[ -x "$tmp/mgpu-compare" ]]; then
	step compare-before "$tmp/mgpu-compare" >"$out/compare-before.txt" 2>&1
fi
step suite env GDR_REPORTS="$out/reports" "$here/run.sh" >"$out/suite.txt" 2>&1
step bench "$here/bin/gpu.test" -test.run '^$' -test.bench 'Copy' -test.benchtime 20x >"$out/bench.txt" 2>&1
if [[ -x "$tmp/mgpu-compare" ]]; then
	step compare-after "$tmp/mgpu-compare" >"$out/compare-after.txt" 2>&1
fi
cat "$out/exit.txt"
