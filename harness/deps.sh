#!/usr/bin/env bash
# Installs what building the suite with the given tags needs, where it can
# (apt-get or dnf as root), otherwise names what is missing and exits 1.
#   harness/deps.sh gpu,rdma
# The gpu tag needs nothing at build time (libcuda.so.1 is opened at run time).
# The rdma tag needs a C compiler and rdma-core's headers (infiniband/verbs.h).
set -euo pipefail
tags="${1:-}"
need=()
if ! command -v gcc >/dev/null 2>&1 && ! command -v cc >/dev/null 2>&1; then
	need+=(gcc)
fi
if [[ ",$tags," == *",rdma,"* ]]; then
	if ! echo '#include <infiniband/verbs.h>' | ${CC:-cc} -E -x c - >/dev/null 2>&1; then
		need+=(rdma-headers)
	fi
fi
[[ ${#need[@]} -eq 0 ]] && exit 0

apt_pkgs=(); dnf_pkgs=()
for n in "${need[@]}"; do
	case "$n" in
	gcc) apt_pkgs+=(gcc libc6-dev); dnf_pkgs+=(gcc) ;;
	rdma-headers) apt_pkgs+=(libibverbs-dev); dnf_pkgs+=(rdma-core-devel) ;;
	esac
done
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
	echo "deps: installing ${apt_pkgs[*]} (apt-get)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
elif [[ $(id -u) -eq 0 ]] && command -v dnf >/dev/null 2>&1; then
	echo "deps: installing ${dnf_pkgs[*]} (dnf)" >&2
	dnf install -y -q "${dnf_pkgs[@]}" >/dev/null
else
	echo "deps: building with tags '$tags' needs: apt: ${apt_pkgs[*]} / dnf: ${dnf_pkgs[*]}" >&2
	echo "deps: install them as root, or build with fewer tags (make conformance TAGS=)" >&2
	exit 1
fi
