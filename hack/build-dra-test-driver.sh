#!/usr/bin/env bash
# Builds Kubernetes' DRA test driver (k8s.io/kubernetes/test/e2e/dra/test-driver: a kubelet
# plugin that publishes a ResourceSlice of simulated devices and prepares them by writing CDI
# specs that set environment variables) from the k8s.io/kubernetes module at one release, into
# a cache directory outside the repository, once. Prints the binary's path on its last line.
#
#   hack/build-dra-test-driver.sh [v1.N.x]
#
# The release is chosen as hack/build-control-plane.sh chooses it, and built from the same Go
# module (hack/k8s/<release>/), copied to a scratch directory first: the module pins only the
# commands of the cluster, and `go build` may add the test driver's requirements to the copy's
# go.mod, never to the repository's. The cache directory is keyed by a hash of the module files
# and this script. PLUMB_CACHE_DIR moves the cache (default ~/.cache/plumb).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
version="${1:-${PLUMB_KUBE_VERSION:-$KUBE_VERSION}}"
module="$here/k8s/$version"
if [[ ! "$version" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || [ ! -f "$module/go.mod" ]; then
  known="$(cd "$here/k8s" && ls -d v*/ | tr -d / | tr '\n' ' ')"
  echo "error: hack/k8s/ has no Go module for Kubernetes $version; the releases it builds:" \
    "${known% } (hack/add-kube-version.sh adds one)" >&2
  exit 2
fi

cache="${PLUMB_CACHE_DIR:-$HOME/.cache/plumb}"
key="$(cat "$module/go.mod" "$module/go.sum" "$module/tools.go" "${BASH_SOURCE[0]}" \
        | sha256sum | cut -c1-12)"
bin="$cache/dra-test-driver-$version-$key"
driver="$bin/dra-test-driver"
if [ -x "$driver" ]; then
  echo "DRA test driver: reusing $driver" >&2
  echo "$driver"
  exit 0
fi

need_go="$(awk '$1 == "go" { print $2; exit }' "$module/go.mod")"
command -v go >/dev/null || {
  echo "error: 'go' is not on PATH; Kubernetes $version needs Go $need_go or newer" >&2
  exit 1
}
mkdir -p "$cache"
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$module/go.mod" "$module/go.sum" "$work/"
# -buildvcs=false: built from the module cache, not from this checkout.
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
log="$work/build.log"
start=$SECONDS
echo "building the DRA test driver of Kubernetes $version from Go modules (first time only)..." >&2
(cd "$work" && go build -v -trimpath -ldflags "-s -w" -o "$work/dra-test-driver" \
    k8s.io/kubernetes/test/e2e/dra/test-driver) >"$log" 2>&1 || true
if [ ! -x "$work/dra-test-driver" ]; then
  echo "error: building the DRA test driver failed; last lines of the build log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
mkdir -p "$bin"
mv "$work/dra-test-driver" "$driver"
echo "built the DRA test driver in $((SECONDS - start)) s" >&2
echo "$driver"
