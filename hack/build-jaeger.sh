#!/usr/bin/env bash
# Builds Jaeger (the `jaeger` command of github.com/jaegertracing/jaeger v1.75.0: Jaeger v2, an
# OTel Collector with Jaeger's storage and query extensions), which `plumb cluster up --tracing`
# runs to receive kube-apiserver's, etcd's and plumb's spans, from the Go module proxy into a
# cache directory outside the repository, once. Prints the binary's path on its last line.
#
#   hack/build-jaeger.sh
#
# How: Jaeger's go.mod has a replace directive, so `go install ...@v1.75.0` is refused; it is
# built from hack/jaeger/, a module of ours that requires it as a tool and repeats that replace
# line (as hack/etcd/ builds etcd). The version variables are set as upstream's
# scripts/makefiles/BuildInfo.mk sets them (to the module version: there is no git checkout).
# The binary has no web UI (the UI's assets are not in the module); the HTTP query API works.
#
# The first build downloads a large module graph (the OTel Collector and its contrib
# components, every storage backend) and compiles it: many minutes on 2 cores. The cache
# directory is keyed by a hash of hack/jaeger/'s files and this script. PLUMB_CACHE_DIR moves the
# cache (default ~/.cache/plumb).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/jaeger"
version=v1.75.0
package=github.com/jaegertracing/jaeger/cmd/jaeger

cache="${PLUMB_CACHE_DIR:-$HOME/.cache/plumb}"
key="$(cat "$module/go.mod" "$module/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)"
bin="$cache/jaeger-$version-$key"
binary="$bin/jaeger"
if [ -x "$binary" ]; then
  echo "jaeger: reusing $binary" >&2
  echo "$binary"
  exit 0
fi

need_go="$(awk '$1 == "go" { print $2; exit }' "$module/go.mod")"
command -v go >/dev/null || {
  echo "error: 'go' is not on PATH; Jaeger $version needs Go $need_go or newer" >&2
  exit 1
}
mkdir -p "$cache"
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
log="$work/build.log"
start=$SECONDS
echo "building Jaeger $version from Go modules (first time only; many minutes on 2 cores and a" \
  "large module download)..." >&2

# -buildvcs=false: the module is built from the module cache, not from this checkout.
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
vars=github.com/jaegertracing/jaeger/internal/version
flags="-s -w -X $vars.latestVersion=$version -X $vars.commitSHA=module-$version"
flags+=" -X $vars.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
# Prints a line every 100 compiled packages, so a first build shows it is alive; the full log is
# shown on failure.
(cd "$module" && go build -v -trimpath -ldflags "$flags" -o "$work/jaeger" "$package") 2>&1 \
  | tee "$log" | awk '{ if (NR % 100 == 0) { printf "  ... %d packages\n", NR > "/dev/stderr" } }' \
  || true
if [ ! -x "$work/jaeger" ]; then
  echo "error: building Jaeger $version failed; last lines of the build log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
mkdir -p "$bin"
mv "$work/jaeger" "$binary"
echo "built Jaeger $version in $((SECONDS - start)) s" >&2
echo "$binary"
