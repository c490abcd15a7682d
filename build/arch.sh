# Architecture names for the dist's cross build (sourced by deps.sh and
# dist/build.sh): Go's GOARCH, the kernel's uname -m, Debian's GNU triplet
# and cross packages. Only the architectures the suite ships: amd64 and
# arm64 (Grace).

# arch_native prints this host's GOARCH.
arch_native() {
	case "$(uname -m)" in
	x86_64) echo amd64 ;;
	aarch64 | arm64) echo arm64 ;;
	*) uname -m ;;
	esac
}

# arch_goarch prints the GOARCH of an architecture name: Go's own, or the
# kernel's (uname -m, and ARCH=x86/arm64 as kernel builds export it).
arch_goarch() {
	case "$1" in
	x86 | x86_64) echo amd64 ;;
	aarch64) echo arm64 ;;
	*) echo "$1" ;;
	esac
}

# arch_triplet prints the GNU triplet of a GOARCH, or fails naming it.
arch_triplet() {
	case "$(arch_goarch "$1")" in
	amd64) echo x86_64-linux-gnu ;;
	arm64) echo aarch64-linux-gnu ;;
	*)
		echo "ARCH=$1: the dist is built for amd64 or arm64" >&2
		return 1
		;;
	esac
}

# arch_cc prints the C compiler for a GOARCH: empty for this host's (cgo
# then uses CC or cc), else Debian's cross compiler <triplet>-gcc.
arch_cc() {
	local t
	t=$(arch_triplet "$1") || return 1
	[[ "$1" == "$(arch_native)" ]] && return 0
	echo "$t-gcc"
}

# arch_apt_cross prints Debian's cross compiler and C library packages for
# a GOARCH (its triplet with - for _; the C library by Debian arch name).
arch_apt_cross() {
	local t
	t=$(arch_triplet "$1") || return 1
	echo "gcc-${t//_/-} libc6-dev-$1-cross"
}

# arch_qemu prints qemu's system emulator for a GOARCH's lab guests
# (lab/vm/arch.go's Arch.QEMU).
arch_qemu() {
	case "$(arch_goarch "$1")" in
	amd64) echo qemu-system-x86_64 ;;
	arm64) echo qemu-system-aarch64 ;;
	*)
		echo "the lab runs amd64 or arm64 guests, not $1" >&2
		return 1
		;;
	esac
}

# arch_apt_qemu prints Debian's package of that emulator (Arch.QEMUPackage).
arch_apt_qemu() {
	case "$(arch_goarch "$1")" in
	amd64) echo qemu-system-x86 ;;
	arm64) echo qemu-system-arm ;;
	*) return 1 ;;
	esac
}
