#!/usr/bin/env bash
# Prints a release that internal/testing/kubetest/version.go names, the one
# place it lives: kubetest-version.sh Version (kube-apiserver's, for
# install-kube-apiserver.sh) or EtcdVersion (etcd's, for install-etcd.sh).
# Fails, saying so, when the line is not there.
set -euo pipefail
file="$(cd "$(dirname "$0")/.." && pwd)/internal/testing/kubetest/version.go"
v=$(sed -n "s/^const $1 = \"\(v[0-9]*\.[0-9]*\.[0-9]*\)\"\$/\1/p" "$file")
if [ -z "$v" ]; then
  echo "kubetest-version: no $1 in $file" >&2
  exit 1
fi
echo "$v"
