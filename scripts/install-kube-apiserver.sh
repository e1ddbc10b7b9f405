#!/usr/bin/env bash
# Builds the Kubernetes programs that vminit's tests run against
# (internal/testing/kubetest): kube-apiserver, and kubectl for the tests that
# apply the manifests the way an operator does. No Kubernetes distribution is
# installable from Debian, so they are built from the Go module proxy:
# k8s.io/kubernetes at the release internal/testing/kubetest/version.go names,
# with each of its k8s.io/* staging modules (which its go.mod points at v0.0.0)
# replaced by the published v0.N.P of the same release.
#
# The build happens in a temporary module, never in vminit's go.mod: these are
# test tools, like etcd. Results go to
#   $VMINIT_TEST_TOOLS_DIR (default /var/cache/vminit-test-tools)/
#     kube-apiserver-<version>/kube-apiserver
#     kubectl-<version>/kubectl
# and a program whose binary for that version is already there (and says so
# with --version) is not built again.
#
# Usage: install-kube-apiserver.sh [PROGRAM...]   (default: kube-apiserver kubectl)
#
# Cost on a 2-core machine with cold caches: docs/kubernetes-test-tools.md.
# Go's build cache keeps the compiled packages, so a rebuild after the cache
# directory is lost is much quicker. Uses sudo to write the cache dir if needed.
set -euo pipefail

VERSION=$("$(dirname "$0")/kubetest-version.sh" Version)
STAGING="v0.${VERSION#v1.}" # v1.36.3 -> v0.36.3
DEST="${VMINIT_TEST_TOOLS_DIR:-/var/cache/vminit-test-tools}"

programs=("$@")
if [ ${#programs[@]} -eq 0 ]; then programs=(kube-apiserver kubectl); fi

# installed PROGRAM: the cached binary exists and reports $VERSION.
installed() {
  local bin="$DEST/$1-$VERSION/$1" out
  [ -x "$bin" ] || return 1
  case $1 in
    kube-apiserver) out=$("$bin" --version 2>/dev/null) || return 1 ;;
    kubectl)        out=$("$bin" version --client 2>/dev/null) || return 1 ;;
    *) return 1 ;;
  esac
  case $out in *" $VERSION"*) return 0 ;; esac
  return 1
}

todo=()
for p in "${programs[@]}"; do
  case $p in
    kube-apiserver|kubectl) ;;
    *) echo "install-kube-apiserver: unknown program $p (kube-apiserver, kubectl)" >&2; exit 2 ;;
  esac
  if installed "$p"; then
    echo "install-kube-apiserver: $p $VERSION already in $DEST/$p-$VERSION"
  else
    todo+=("$p")
  fi
done
[ ${#todo[@]} -gt 0 ] || exit 0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The temporary module: outside any workspace, tolerant of go.mod updates.
export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0
cd "$tmp"
printf 'module kubetools\n' > go.mod
# Download before requiring it: with the requirement in go.mod, `go mod
# download` loads the module graph first and fails on the staging modules'
# v0.0.0 (which only the replacements below make resolvable).
gomod=$(go mod download -json "k8s.io/kubernetes@$VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
go mod edit -require "k8s.io/kubernetes@$VERSION"
# The staging modules are the ones k8s.io/kubernetes requires at v0.0.0.
staging=$(sed -n 's/^\t\(k8s\.io\/[a-z0-9-]*\) v0\.0\.0$/\1/p' "$gomod")
if [ -z "$staging" ]; then
  echo "install-kube-apiserver: found no k8s.io/* v0.0.0 requirements in $gomod" >&2
  exit 1
fi
for m in $staging; do go mod edit -replace "$m=$m@$STAGING"; done
# go mod edit leaves the go line at the local toolchain's; Kubernetes sets its own.
go mod edit -go "$(sed -n 's/^go //p' "$gomod")"

pkgs=()
for p in "${todo[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$p"); done
# What `kube-apiserver --version` prints, and what the server reports as its
# binary version (it decides the emulated API version): the release, as
# Kubernetes' own build stamps it, rather than the v0.0.0 default.
ldflags="-s -w"
for kv in "gitVersion=$VERSION" "gitMajor=1" "gitMinor=$(echo "$VERSION" | cut -d. -f2)" "gitTreeState=clean"; do
  ldflags="$ldflags -X k8s.io/component-base/version.$kv"
done
echo "install-kube-apiserver: building ${todo[*]} $VERSION (staging modules at $STAGING); this takes minutes" >&2
start=$(date +%s)
mkdir "$tmp/bin"
nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" "${pkgs[@]}"
echo "install-kube-apiserver: built in $(( $(date +%s) - start )) s" >&2

if [ "$(id -u)" = 0 ] || [ -w "$DEST" ] || { [ ! -e "$DEST" ] && [ -w "$(dirname "$DEST")" ]; }; then S=""; else S=sudo; fi
for p in "${todo[@]}"; do
  dir="$DEST/$p-$VERSION"
  $S mkdir -p "$dir"
  # Copy under a temporary name, then rename: a concurrent reader sees the
  # old binary or the new one, never half of one.
  $S install -m 0755 "$tmp/bin/$p" "$dir/.$p.new"
  $S mv -f "$dir/.$p.new" "$dir/$p"
  $S chmod a+rx "$DEST" "$dir"
  if ! installed "$p"; then
    echo "install-kube-apiserver: $dir/$p does not report $VERSION" >&2
    exit 1
  fi
  echo "install-kube-apiserver: installed $p $VERSION in $dir"
done
