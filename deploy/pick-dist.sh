#!/bin/sh
# Copies the dist built for the image's platform into the image
# (deploy/Dockerfile runs it with the build context mounted): make dist
# writes dist/ for the build host's architecture, make dist ARCH=<arch>
# writes dist-<arch>/, and each records its architecture in ARCH. A
# multi-arch build (docker buildx build --platform linux/amd64,linux/arm64)
# takes dist-amd64/ and dist-arm64/; a single one takes dist/ when it fits.
#   pick-dist.sh <context> <GOARCH> <destination>
set -eu
ctx="$1" arch="$2" dst="$3"
if [ -z "$arch" ]; then
	echo "pick-dist.sh: no target architecture (TARGETARCH is set by BuildKit, buildx and podman)" >&2
	exit 1
fi
found=""
for d in "$ctx/dist-$arch" "$ctx/dist"; do
	[ -f "$d/ARCH" ] || continue
	built=$(cat "$d/ARCH")
	if [ "$built" = "$arch" ]; then
		mkdir -p "$dst"
		cp -a "$d/." "$dst/"
		echo "pick-dist.sh: ${d#"$ctx"/}/ ($built) -> $dst"
		exit 0
	fi
	found="$found ${d#"$ctx"/}/ ($built)"
done
echo "pick-dist.sh: no dist built for $arch in the build context (found:${found:- none}): run make dist ARCH=$arch first" >&2
exit 1
