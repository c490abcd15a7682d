#!/usr/bin/env bash
# Installs what building the suite with the given tags needs, where it can
# (apt-get or dnf as root), otherwise names what is missing and exits 1.
#   build/deps.sh gpu,rdma          build prerequisites of the suite
#   build/deps.sh --unit gpu,rdma   the same, plus what the unit tests need (xmllint)
#   build/deps.sh --test gpu,rdma   the same, plus what the browser test needs too
# The gpu tag needs nothing at build time (libcuda.so.1 is opened at run time).
# The rdma tag needs a C compiler and rdma-core's headers (infiniband/verbs.h).
# When the headers are missing, rdma-core's user space is installed as one
# consistent set (verbs and rdmacm, headers and libraries, with the providers):
# installing libibverbs-dev alone leaves a host with libibverbs1 but without
# librdmacm1, a state no rdma-core install has, and INST-07 would then fail
# the host for what the suite itself did. A host that already has the headers
# gets nothing installed: its own rdma-core is what the suite checks.
# --unit adds xmllint (libxml2's validator): the report's and the lab's JUnit
# files are validated against the two XSDs CI systems use (report/junitcheck).
# --test adds that, and headless Chromium and a font, for the report's
# browser test.
# It checks first: a host that has everything passes, as any user; only a
# missing piece needs root (and the network for the packages), and a user
# who is not root is told what is missing and what to run as root.
set -euo pipefail
test_mode=0 # 1: --unit, 2: --test
case "${1:-}" in
--unit) test_mode=1; shift ;;
--test) test_mode=2; shift ;;
esac
tags="${1:-}"
need=()
if ! command -v gcc >/dev/null 2>&1 && ! command -v cc >/dev/null 2>&1; then
	need+=(gcc)
fi
if [[ ",$tags," == *",rdma,"* ]]; then
	if ! echo '#include <infiniband/verbs.h>' | ${CC:-cc} -E -x c - >/dev/null 2>&1; then
		need+=(rdma-core)
	fi
fi
if [[ $test_mode -ge 1 ]] && ! command -v xmllint >/dev/null 2>&1; then
	need+=(xmllint)
fi
if [[ $test_mode -eq 2 ]] && ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
	need+=(chromium)
fi
[[ ${#need[@]} -eq 0 ]] && exit 0

apt_pkgs=(); dnf_pkgs=()
for n in "${need[@]}"; do
	case "$n" in
	gcc) apt_pkgs+=(gcc libc6-dev); dnf_pkgs+=(gcc) ;;
	rdma-core) apt_pkgs+=(libibverbs-dev librdmacm-dev); dnf_pkgs+=(rdma-core-devel) ;;
	chromium) apt_pkgs+=(chromium fonts-dejavu-core); dnf_pkgs+=(chromium dejavu-sans-fonts) ;;
	xmllint) apt_pkgs+=(libxml2-utils); dnf_pkgs+=(libxml2) ;;
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
	target=deps
	why=""
	[[ $test_mode -eq 1 ]] && target=deps-unit && why=', and the unit tests'
	[[ $test_mode -eq 2 ]] && target=deps-test && why=', and the unit and browser tests'
	echo "deps: missing: ${need[*]} (building with tags '$tags'$why)" >&2
	if [[ $(id -u) -ne 0 ]]; then
		echo "deps: as root, run: make $target TAGS=$tags   (or: apt-get install ${apt_pkgs[*]} / dnf install ${dnf_pkgs[*]})" >&2
	else
		echo "deps: no apt-get or dnf here: install apt: ${apt_pkgs[*]} / dnf: ${dnf_pkgs[*]}" >&2
	fi
	[[ $test_mode -eq 0 ]] && echo "deps: or build with fewer tags (make conformance TAGS=)" >&2
	exit 1
fi
