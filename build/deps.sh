#!/usr/bin/env bash
# Installs what building the suite with the given tags needs, where it can
# (apt-get or dnf as root), otherwise names what is missing and exits 1.
#   build/deps.sh gpu,rdma          build prerequisites of the suite
#   build/deps.sh --unit gpu,rdma   the same, plus what the unit tests need (xmllint)
#   build/deps.sh --test gpu,rdma   the same, plus what the browser test needs too
#   build/deps.sh --arch arm64 gpu,rdma   build prerequisites for another architecture
#   build/deps.sh --lab arm64 gpu,rdma    the same, plus what make lab-arm64 needs
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
# --arch <GOARCH> (make dist ARCH=arm64) adds a cross C compiler and its C
# library (Debian's gcc-aarch64-linux-gnu and libc6-dev-arm64-cross) when the
# architecture is not this host's. rdma-core's headers are the same for every
# architecture (/usr/include/infiniband, Multi-Arch: same) and the suite
# opens libibverbs at run time, so the cross build links no arm64 rdma-core:
# the host's headers serve, and no foreign dpkg architecture is added.
# --lab <GOARCH> (make lab-arm64) adds, for another architecture than this
# host's, what its qemu lab needs besides: qemu's system emulator for it
# (Debian's qemu-system-arm has qemu-system-aarch64; the lab boots the
# kernel directly, so no firmware) and the architecture as a dpkg foreign
# architecture, so that apt-get download fetches its kernel, rdma-core and
# C library (the lab's parts: lab/vm/arch.go names the same packages).
# It checks first: a host that has everything passes, as any user; only a
# missing piece needs root (and the network for the packages), and a user
# who is not root is told what is missing and what to run as root.
set -euo pipefail
test_mode=0 # 1: --unit, 2: --test
arch=""
lab=0
while [[ $# -gt 0 ]]; do
	case "$1" in
	--unit) test_mode=1; shift ;;
	--test) test_mode=2; shift ;;
	--arch) arch="${2:-}"; shift 2 || shift ;;
	--lab) arch="${2:-}"; lab=1; shift 2 || shift ;;
	*) break ;;
	esac
done
tags="${1:-}"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=build/arch.sh
source "$here/arch.sh"
cross_cc=""
if [[ -n "$arch" ]]; then
	arch=$(arch_goarch "$arch")
	cross_cc=$(arch_cc "$arch") || exit 1
fi
need=()
if ! command -v gcc >/dev/null 2>&1 && ! command -v cc >/dev/null 2>&1; then
	need+=(gcc)
fi
if [[ -n "$cross_cc" ]] && ! echo 'int main(void){return 0;}' | "$cross_cc" -x c - -ldl -o /dev/null >/dev/null 2>&1; then
	need+=("cross-$arch")
fi
if [[ $lab -eq 1 && -n "$cross_cc" ]]; then
	command -v "$(arch_qemu "$arch")" >/dev/null 2>&1 || need+=("qemu-$arch")
	dpkg --print-foreign-architectures 2>/dev/null | grep -qx "$arch" || need+=("dpkg-$arch")
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
# Optional for the unit tests: the arm64 (Grace) builds are checked there
# when a cross compiler and qemu's user-mode emulator are at hand
# (build/dist_arch_test.go builds make dist ARCH=arm64 and runs its binaries
# under qemu-aarch64; fixtures/ runs the host trees with arm64 binaries).
# Installed as root with apt-get; elsewhere those tests skip, naming them.
if [[ $test_mode -ge 1 ]]; then
	opt=()
	command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || opt+=($(arch_apt_cross arm64))
	command -v qemu-aarch64 >/dev/null 2>&1 || opt+=(qemu-user)
	if [[ ${#opt[@]} -gt 0 ]]; then
		if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
			echo "deps: installing ${opt[*]} (apt-get; the arm64 build tests)" >&2
			export DEBIAN_FRONTEND=noninteractive
			apt-get update -qq >/dev/null
			apt-get install -y -qq --no-install-recommends "${opt[@]}" >/dev/null
		else
			echo "deps: optional, not installed: ${opt[*]} (the arm64 build tests skip without them)" >&2
		fi
	fi
fi
[[ ${#need[@]} -eq 0 ]] && exit 0

apt_pkgs=(); dnf_pkgs=(); add_arch=""
for n in "${need[@]}"; do
	case "$n" in
	gcc) apt_pkgs+=(gcc libc6-dev); dnf_pkgs+=(gcc) ;;
	rdma-core) apt_pkgs+=(libibverbs-dev librdmacm-dev); dnf_pkgs+=(rdma-core-devel) ;;
	chromium) apt_pkgs+=(chromium fonts-dejavu-core); dnf_pkgs+=(chromium dejavu-sans-fonts) ;;
	xmllint) apt_pkgs+=(libxml2-utils); dnf_pkgs+=(libxml2) ;;
	cross-*)
		# Debian's cross toolchains; Fedora ships no cross C library for
		# user space, so a dnf host is told to build on the target's
		# architecture instead.
		apt_pkgs+=($(arch_apt_cross "$arch")); dnf_pkgs+=("(none: build on a $arch host)") ;;
	qemu-*) apt_pkgs+=($(arch_apt_qemu "$arch")); dnf_pkgs+=("qemu-system-$(arch_qemu "$arch" | sed 's/qemu-system-//')") ;;
	dpkg-*) add_arch="$arch"; dnf_pkgs+=("(none: the lab fetches Debian's $arch packages)") ;;
	esac
done
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
	if [[ -n "$add_arch" ]]; then
		echo "deps: dpkg --add-architecture $add_arch (the $add_arch lab's Debian packages)" >&2
		dpkg --add-architecture "$add_arch"
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null
	if [[ ${#apt_pkgs[@]} -gt 0 ]]; then
		echo "deps: installing ${apt_pkgs[*]} (apt-get)" >&2
		apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
	fi
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
		[[ $lab -eq 1 ]] && target="lab-$arch"
		inst=""
		[[ ${#apt_pkgs[@]} -gt 0 ]] && inst=" apt-get install ${apt_pkgs[*]} / dnf install ${dnf_pkgs[*]}"
		echo "deps: as root, run: make $target TAGS=$tags   (or:${add_arch:+ dpkg --add-architecture $add_arch; apt-get update;}$inst)" >&2
	else
		echo "deps: no apt-get or dnf here: install apt: ${apt_pkgs[*]} / dnf: ${dnf_pkgs[*]}" >&2
	fi
	[[ $test_mode -eq 0 ]] && echo "deps: or build with fewer tags (make conformance TAGS=)" >&2
	exit 1
fi
