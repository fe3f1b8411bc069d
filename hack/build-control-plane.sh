#!/usr/bin/env bash
# Builds etcd and the Kubernetes commands of the local cluster (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, and kubelet and kube-proxy for the real node)
# at one Kubernetes release from their Go modules into a cache outside the repository, once per
# release. Prints the binary directory on its last line.
#
#   hack/build-control-plane.sh [v1.N.x]
#
# The release is the argument, else $PLUMB_KUBE_VERSION, else KUBE_VERSION in hack/versions.env
# (the default). hack/k8s/<release>/ is the Go module that builds it; a release without one is
# refused (hack/add-kube-version.sh writes one). Each release has its own cache directory, keyed
# by a hash of its module files, etcd's and this script, so a change to any of them rebuilds that
# release and everything else is reused. PLUMB_CACHE_DIR moves the cache (default ~/.cache/plumb).
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
key="$(cat "$module/go.mod" "$module/go.sum" "$module/tools.go" "$here/etcd/go.mod" \
        "$here/etcd/go.sum" "$here/etcd/main.go" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)"
bin="$cache/k8s-$version-etcd-$ETCD_VERSION-$key"
kube=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)
want=(etcd "${kube[@]}")

have_all() { for b in "${want[@]}"; do [ -x "$bin/$b" ] || return 1; done; }
if have_all; then
  echo "control plane binaries: reusing $bin" >&2
  echo "$bin"
  exit 0
fi

# The go line of the release's own go.mod: 1.24 for v1.34, 1.25 for v1.35, 1.26 from v1.36.
need_go="$(awk '$1 == "go" { print $2; exit }' "$module/go.mod")"
command -v go >/dev/null || {
  echo "error: 'go' is not on PATH; Kubernetes $version needs Go $need_go or newer" >&2
  exit 1
}
mkdir -p "$bin"
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# -buildvcs=false: the modules are built from the module cache, not from this checkout.
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"

# Prints a line every 100 compiled packages, so a first build shows it is alive; the full log is
# kept and shown on failure.
build() {
  local what="$1" dir="$2" ldflags="$3"; shift 3
  local log="$work/$what.log" start=$SECONDS
  echo "building $what from Go modules (first time only; several minutes on 2 cores)..." >&2
  if ! (cd "$dir" && go build -v -trimpath -ldflags "$ldflags" -o "$work/" "$@") 2>&1 \
        | tee "$log" | awk '{ if (NR % 100 == 0) { printf "  ... %d packages\n", NR > "/dev/stderr" } }'; then
    :
  fi
  for p in "$@"; do
    local name="${p##*/}"; [ "$name" = "." ] && name="$what"
    if [ ! -x "$work/$name" ]; then
      echo "error: building $what failed; last lines of the build log:" >&2
      tail -n 30 "$log" >&2
      exit 1
    fi
  done
  echo "built $what in $((SECONDS - start)) s" >&2
}

if [ ! -x "$bin/etcd" ]; then
  build etcd "$here/etcd" "-s -w" .
  mv "$work/etcd" "$bin/etcd"
fi

missing_kube=()
for b in "${kube[@]}"; do [ -x "$bin/$b" ] || missing_kube+=("$b"); done
if [ "${#missing_kube[@]}" -gt 0 ]; then
  minor="${version#v1.}"; minor="${minor%%.*}"
  flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    # Built from the published module, not a git checkout: say so instead of "$Format:%H$".
    flags+=" -X $pkg.gitCommit=module-$version"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  # One `go build` for all of them, so the packages they share compile once.
  build "kubernetes $version (${missing_kube[*]})" "$module" "$flags" \
    "${missing_kube[@]/#/k8s.io/kubernetes/cmd/}"
  for b in "${missing_kube[@]}"; do mv "$work/$b" "$bin/"; done
fi

have_all
echo "control plane binaries ready in $bin" >&2
echo "$bin"
