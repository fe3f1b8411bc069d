#!/usr/bin/env bash
# Builds scheduler-plugins' kube-scheduler (cmd/scheduler of sigs.k8s.io/scheduler-plugins
# v0.34.7: the kube-scheduler v1.34 command with the out-of-tree plugins registered, Coscheduling
# among them), which the side-by-side tests of gang scheduling run beside plumb, from the Go
# module proxy into a cache directory outside the repository, once. Prints the binary's path on
# its last line.
#
#   hack/build-scheduler-plugins.sh
#
# How: scheduler-plugins pins its Kubernetes modules with replace directives, which Go ignores in
# a dependency, so the command cannot be built from a module of ours that merely requires it
# (`go install ...@v0.34.7` is refused for the same reason). It is built as its own Makefile
# builds it, inside a writable copy of the downloaded module, so that its go.mod and go.sum are
# used as published and the build list is exactly the one its CI tested. A module of ours would
# have to repeat its whole require list as well as its replace block: with only the replace
# block, `go mod tidy` widens the module graph and asks for k8s.io/cluster-bootstrap v0.34.7's
# go.mod, which the proxy refuses (403).
#
# One deviation, made in the copy: k8s.io/csi-translation-lib v0.34.7 is not served by the
# module proxy plumb's machines reach ("403 Forbidden / This module version is not available"),
# so it is replaced by v0.34.4, the nearest patch release that is; its go.sum lines are below,
# so the build stays -mod=readonly and fetches nothing unverified. Every other module is at the
# version scheduler-plugins pins (Kubernetes v1.34.7).
#
# The cache directory is keyed by a hash of this script, which names everything the build reads
# (the version, the deviation, the flags). PLUMB_CACHE_DIR moves the cache (default
# ~/.cache/plumb).
set -euo pipefail

module=sigs.k8s.io/scheduler-plugins
version=v0.34.7
# The version it reports, and the one its feature gates and emulation version follow: the
# Kubernetes release it is built from. scheduler-plugins' Makefile writes its own tag, v0.34.7,
# with which this binary refuses to start ("emulation version 0.34 is not between [1.31,
# 0.34.0]").
kube_version=v1.34.7
csi=k8s.io/csi-translation-lib
csi_version=v0.34.4
csi_sums="$csi $csi_version h1:7vldYwrJku7qmo0IBOPqnvTlSToJX6zIZbb8AvdtIW4=
$csi $csi_version/go.mod h1:H6roH1JcvrHYg5jXFH8o60vmBxyxw12NCdk9p7mccLE="

cache="${PLUMB_CACHE_DIR:-$HOME/.cache/plumb}"
key="$(sha256sum <"${BASH_SOURCE[0]}" | cut -c1-12)"
bin="$cache/scheduler-plugins-$version-$key"
binary="$bin/kube-scheduler"
if [ -x "$binary" ]; then
  echo "scheduler-plugins' kube-scheduler: reusing $binary" >&2
  echo "$binary"
  exit 0
fi

command -v go >/dev/null || {
  echo "error: 'go' is not on PATH; scheduler-plugins $version needs Go 1.24 or newer" >&2
  exit 1
}
mkdir -p "$cache"
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
log="$work/build.log"
start=$SECONDS
echo "building scheduler-plugins $version's kube-scheduler from Go modules (first time only;" \
  "several minutes on 2 cores)..." >&2

# Outside any module: download it (checked against the checksum database) and find its directory.
if ! json="$(cd "$work" && GOFLAGS= go mod download -json "$module@$version" 2>"$log")"; then
  echo "error: go mod download $module@$version failed:" >&2
  cat "$log" >&2
  exit 1
fi
dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$json")"
if [ ! -f "$dir/go.mod" ]; then
  echo "error: go mod download $module@$version named no module directory:" >&2
  echo "$json" >&2
  exit 1
fi
# The module cache is read-only; the copy takes what cmd/scheduler is built from.
src="$work/src"
mkdir -p "$src"
cp -r "$dir/go.mod" "$dir/go.sum" "$dir/apis" "$dir/cmd" "$dir/pkg" "$src/"
chmod -R u+w "$src"
(cd "$src" && go mod edit -replace="$csi=$csi@$csi_version")
printf '%s\n' "$csi_sums" >>"$src/go.sum"

# -buildvcs=false: built from the module cache, not from a checkout.
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
flags="-s -w"
minor="${kube_version#v1.}"; minor="${minor%%.*}"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  flags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  flags+=" -X $pkg.gitCommit=module-scheduler-plugins-$version -X $pkg.gitTreeState=clean"
  flags+=" -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done
# Prints a line every 100 compiled packages, so a first build shows it is alive; the full log is
# shown on failure.
(cd "$src" && go build -v -trimpath -ldflags "$flags" -o "$work/kube-scheduler" ./cmd/scheduler) \
  2>&1 | tee -a "$log" \
  | awk '{ if (NR % 100 == 0) { printf "  ... %d packages\n", NR > "/dev/stderr" } }' || true
if [ ! -x "$work/kube-scheduler" ]; then
  echo "error: building scheduler-plugins $version's kube-scheduler failed; last lines of the" \
    "build log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
mkdir -p "$bin"
mv "$work/kube-scheduler" "$binary"
echo "built scheduler-plugins $version's kube-scheduler in $((SECONDS - start)) s" >&2
echo "$binary"
