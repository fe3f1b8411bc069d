#!/usr/bin/env bash
# Adds hack/k8s/<version>/, the Go module that builds the local cluster's Kubernetes commands at
# one release, from k8s.io/kubernetes's own go.mod: its go and godebug lines, and a replace line
# per staging module at the published tag of the same release (v1.N.x -> v0.N.x); `go mod tidy`
# then fills go.sum. Needs the Go module proxy.
#
#   hack/add-kube-version.sh v1.37.2
#
# Then give the release its row in tools/plumb_dev/cluster/controlplane/releases.py (the flags
# that differ between releases); hack/build-control-plane.sh v1.37.2 builds it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${1:?usage: hack/add-kube-version.sh v1.N.x}"
if [[ ! "$version" =~ ^v1\.[0-9]+\.[0-9]+$ ]]; then
  echo "error: $version is not a Kubernetes release such as v1.37.2" >&2
  exit 2
fi
module="$here/k8s/$version"
if [ -e "$module" ]; then
  echo "error: $module already exists; remove it first to write it anew" >&2
  exit 1
fi
command -v go >/dev/null || { echo "error: 'go' is not on PATH" >&2; exit 1; }
staging="v0.${version#v1.}"

# The module's own go.mod, as the proxy serves it (the module zip is not needed).
upstream="$(go mod download -json "k8s.io/kubernetes@$version" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
if [ ! -f "$upstream" ]; then
  echo "error: the Go module proxy gave no go.mod for k8s.io/kubernetes@$version" >&2
  exit 1
fi
go_line="$(awk '$1 == "go" { print; exit }' "$upstream")"
godebug_line="$(awk '$1 == "godebug" { print; exit }' "$upstream")"
mapfile -t modules < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$upstream")
if [ -z "$go_line" ] || [ "${#modules[@]}" -eq 0 ]; then
  echo "error: $upstream has no go line or no staging replace lines; is $version a release?" >&2
  exit 1
fi

mkdir -p "$module"
trap '[ -f "$module/go.sum" ] || rm -rf "$module"' EXIT
{
  echo "// Builds the Kubernetes commands of plumb's local cluster at $version"
  echo "// (hack/build-control-plane.sh $version). Written by hack/add-kube-version.sh:"
  echo "// k8s.io/kubernetes points its staging modules at ./staging/src in its own go.mod; those"
  echo "// replace lines are ignored for a dependency, so they are repeated here with the published"
  echo "// $staging tags. The go and godebug lines are k8s.io/kubernetes $version's own."
  echo "module plumb.dev/hack/k8s"
  echo
  echo "$go_line"
  if [ -n "$godebug_line" ]; then
    echo
    echo "$godebug_line"
  fi
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  for m in "${modules[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
  echo ")"
} > "$module/go.mod"
cat > "$module/tools.go" <<'EOF'
//go:build tools

// Package tools pins the Kubernetes commands this module builds, so that `go mod tidy` keeps
// every module they need in go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOF
echo "resolving the modules of k8s.io/kubernetes $version (go mod tidy)..." >&2
(cd "$module" && go mod tidy)
echo "wrote $module; build it with: hack/build-control-plane.sh $version" >&2
