#!/usr/bin/env bash
# Installs every program vminit's tests use as an oracle, the Linux kernel
# that the QEMU tests boot, the real guests the guest tests boot, and the
# Kubernetes API server the Kubernetes tests run. Safe to run again: it
# skips what is already there.
# Needs root (apt-get); run as a user with sudo otherwise.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

packages=(
  cloud-init            # cloud-init 22.4's own Python reads our seeds
  cloud-image-utils     # cloud-localds: build USER-DATA [META-DATA] makes the seed it makes
  ignition              # ignition-validate and the ignition binary
  xorriso genisoimage   # xorriso -indev, isoinfo; genisoimage for the benchmarks
  libarchive-tools      # bsdtar
  p7zip-full            # 7z
  dosfstools mtools     # fsck.fat, mdir/mtype/mlabel
  util-linux            # blkid
  etcd-server           # the metadata server's etcd store
  busybox-static cpio   # the QEMU tests' initramfs
  qemu-utils            # qemu-img: the copy-on-write overlays vminit run boots
  debootstrap fdisk e2fsprogs syslinux syslinux-common # the test guests' build
  python3-yaml python3-jsonschema python3-netifaces
  # cloudbase-init 1.1.9's own code (its source in ../shared/oracles) reads
  # the Windows seeds and metadata: what it imports (internal/testing/cbitest)
  python3-oslo.config python3-oslo.log python3-pbr python3-netaddr
  python3-requests python3-jinja2 python3-six python3-tzlocal
  chromium              # the first-boot web page's tests (headless, driven by chromedp): ~115 MB download, ~350 MB installed
  fonts-liberation      # chromium's recommended fonts, taken without recommends: the screenshots' text as they were made
  skopeo                # pushes make image's archive to a registry, as deploy/README.md says (cmd/internal/release)
  containerd            # ctr images import of that archive, on a containerd the test runs itself (cmd/internal/release)
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# QEMU without its recommends: the full set pulls in a desktop's worth of libraries.
dpkg -s qemu-system-x86 >/dev/null 2>&1 || missing+=(qemu-system-x86)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

"$(dirname "$0")/install-test-kernel.sh"
# kube-apiserver and kubectl, built from the Go module proxy (minutes, once),
# and the real Debian guests (cloud-init, Ignition) the guest tests boot,
# built with debootstrap (minutes, once; cached by a key of the recipe and
# the package versions; docs/guests.md). The two run side by side: the
# first is mostly compiling, the second mostly downloading and unpacking,
# and on a fresh machine each takes ten minutes or more.
kube_log=$(mktemp)
"$(dirname "$0")/install-kube-apiserver.sh" >"$kube_log" 2>&1 &
kube_pid=$!
guests_rc=0
"$(dirname "$0")/install-test-guests.sh" || guests_rc=$?
kube_rc=0
wait "$kube_pid" || kube_rc=$?
cat "$kube_log"
rm -f "$kube_log"
if [ "$kube_rc" != 0 ] || [ "$guests_rc" != 0 ]; then
  echo "install-test-tools: install-kube-apiserver.sh exited $kube_rc, install-test-guests.sh $guests_rc" >&2
  exit 1
fi
