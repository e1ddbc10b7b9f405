#!/usr/bin/env bash
# Generates what is derived from the Kubernetes API types in kube/api/...:
# the Instance CustomResourceDefinition (deploy/kubernetes/crd/) and the
# DeepCopy methods (zz_generated.deepcopy.go), with controller-gen at a
# pinned version (the release made for the k8s.io v0.36 libraries).
#
#   scripts/generate.sh          write the generated files
#   scripts/generate.sh --check  fail when the committed files are stale
#                                (make check runs this)
set -euo pipefail
CONTROLLER_GEN=sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# controller-gen writes the DeepCopy file beside the types; generate into a
# copy of the API packages so --check never touches the tree.
mkdir -p "$out/crd"
go run "$CONTROLLER_GEN" \
  object paths=./kube/api/... \
  crd:ignoreUnexportedFields=true,maxDescLen=400 output:crd:dir="$out/crd" \
  output:object:dir="$out/object" 2>&1 | { grep -v '^go: downloading' || true; }

status=0
compare() { # generated committed
  if [ "${1:-}" = "" ]; then return; fi
  if [ "$check" = 1 ]; then
    if ! cmp -s "$1" "$2"; then
      echo "generate: $2 is stale; run scripts/generate.sh" >&2
      diff -u "$2" "$1" | head -40 >&2 || true
      status=1
    fi
  else
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2"
  fi
}
check=0
[ "${1:-}" = "--check" ] && check=1
for f in "$out"/crd/*.yaml; do compare "$f" "deploy/kubernetes/crd/$(basename "$f")"; done
compare "$out/object/zz_generated.deepcopy.go" kube/api/v1alpha1/zz_generated.deepcopy.go
exit $status
