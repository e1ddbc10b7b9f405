#!/usr/bin/env bash
# Installs the Linux kernel that vminit's QEMU tests (internal/testing/qemutest) boot:
# Debian's current linux-image-6.1.0-*-amd64 (the one linux-image-amd64 depends
# on), unpacked without installing it as a package, plus only the kernel
# modules the tests need to mount our seed media with the kernel's own drivers
# and to read QEMU fw_cfg:
#
#   isofs, vfat/fat, nls_{cp437,ascii,utf8,iso8859-1}   the file systems
#   virtio_pci, virtio_scsi, sr_mod, cdrom              CD-ROM on virtio-scsi
#   virtio_blk                                          disks
#   qemu_fw_cfg                                         /sys/firmware/qemu_fw_cfg
#
# and whatever those depend on (read from each module's .modinfo "depends=",
# since the .deb carries no modules.dep). Modules are stored decompressed, so
# busybox insmod can load them.
#
# Layout of $VMINIT_TEST_KERNEL_DIR (default /var/cache/vminit-test-kernel):
#   vmlinuz          the kernel image (bzImage)
#   vmlinux          the same kernel decompressed (ELF with a PVH entry note):
#                    QEMU boots it directly, skipping the decompression that
#                    takes ~15 s under TCG
#   config           the kernel's build config, for reference
#   modules/*.ko     the modules, flat
#   modules.load     module file names, one a line, in load order (deps first)
#   VERSION          "<package> <version>"; a rerun with the same one does nothing
#
# Safe to run again. Needs only Debian's apt repositories; runs apt-get update
# only when the download fails. Uses sudo to write the cache dir if needed.
set -euo pipefail

DEST="${VMINIT_TEST_KERNEL_DIR:-/var/cache/vminit-test-kernel}"

# Modules wanted; a module built into the kernel (modules.builtin) is skipped.
WANT=(isofs vfat fat nls_cp437 nls_ascii nls_utf8 nls_iso8859_1
      cdrom sr_mod virtio_pci virtio_scsi virtio_blk qemu_fw_cfg
      virtio_net) # virtio_net: vminit run's guests reach its metadata relay

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

apt_update() {
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -q >&2
}

pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
      sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1 || true)
if [ -z "$pkg" ]; then
  apt_update
  pkg=$(apt-cache depends linux-image-amd64 |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1)
fi
if [ -z "$pkg" ]; then
  echo "install-test-kernel: linux-image-amd64 depends on no linux-image-*-amd64" >&2
  exit 1
fi
ver=$(apt-cache policy "$pkg" | sed -n 's/^ *Candidate: //p')
# The module list is part of the stamp: a new module reinstalls the cache.
stamp="$pkg $ver (${WANT[*]})"

if [ -f "$DEST/VERSION" ] && [ "$(cat "$DEST/VERSION")" = "$stamp" ] &&
   [ -s "$DEST/vmlinuz" ] && [ -s "$DEST/vmlinux" ] && [ -s "$DEST/modules.load" ]; then
  echo "install-test-kernel: $stamp already in $DEST"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp" # apt-get download runs as _apt when it can

echo "install-test-kernel: fetching $stamp" >&2
if ! (cd "$tmp" && apt-get download -q "$pkg" >&2); then
  apt_update
  (cd "$tmp" && apt-get download -q "$pkg" >&2)
fi
deb=$(ls "$tmp"/"$pkg"_*.deb)
dpkg-deb -x "$deb" "$tmp/root"

kver=$(ls "$tmp/root/lib/modules" | head -n1)
moddir="$tmp/root/lib/modules/$kver"
out="$tmp/out"
mkdir -p "$out/modules"
cp "$tmp/root/boot/vmlinuz-$kver" "$out/vmlinuz"
cp "$tmp/root/boot/config-$kver" "$out/config"

# Decompress the bzImage payload (as the kernel's scripts/extract-vmlinux does):
# find the first compressed stream that unpacks to an ELF file.
extract_vmlinux() {
  local magic tool off
  for pair in '\xfd7zXZ\x00:xz -dc --single-stream' '\x28\xb5\x2f\xfd:zstd -qdc' '\x1f\x8b\x08:gzip -dc'; do
    magic=${pair%%:*} tool=${pair#*:}
    for off in $(LC_ALL=C grep -aboP "$magic" "$out/vmlinuz" | cut -d: -f1); do
      tail -c +$((off + 1)) "$out/vmlinuz" | $tool > "$out/vmlinux" 2>/dev/null || true
      if [ "$(head -c 4 "$out/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
        return 0
      fi
    done
  done
  rm -f "$out/vmlinux"
  echo "install-test-kernel: could not decompress vmlinuz; the tests boot the slower bzImage" >&2
}
extract_vmlinux

# Index: module name (dashes as underscores) -> file.
declare -A file_of
while IFS= read -r f; do
  b=${f##*/}
  b=${b%%.ko*}
  file_of[${b//-/_}]=$f
done < <(find "$moddir" -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz')

declare -A builtin
if [ -f "$moddir/modules.builtin" ]; then
  while IFS= read -r f; do
    b=${f##*/}
    b=${b%.ko}
    builtin[${b//-/_}]=1
  done < "$moddir/modules.builtin"
fi

# Copy (decompressing) one module; echo its stored .ko path.
extract() {
  local src=$1 name=${1##*/}
  case "$src" in
    *.ko.xz)  xz -dc "$src" > "$out/modules/${name%.xz}"; echo "${name%.xz}" ;;
    *.ko.zst) zstd -qdc "$src" > "$out/modules/${name%.zst}"; echo "${name%.zst}" ;;
    *.ko.gz)  gzip -dc "$src" > "$out/modules/${name%.gz}"; echo "${name%.gz}" ;;
    *)        cp "$src" "$out/modules/$name"; echo "$name" ;;
  esac
}

declare -A state # 1 = visiting, 2 = done
order=()
visit() {
  local m=${1//-/_}
  [ "${state[$m]:-}" = 2 ] && return 0
  if [ -n "${builtin[$m]:-}" ]; then state[$m]=2; return 0; fi
  if [ "${state[$m]:-}" = 1 ]; then
    echo "install-test-kernel: module dependency cycle at $m" >&2; exit 1
  fi
  local src=${file_of[$m]:-}
  if [ -z "$src" ]; then
    echo "install-test-kernel: module $m not in $pkg (and not built in)" >&2; exit 1
  fi
  state[$m]=1
  local ko deps d
  ko=$(extract "$src")
  deps=$(tr '\0' '\n' < "$out/modules/$ko" | sed -n 's/^depends=//p' | head -n1)
  for d in ${deps//,/ }; do visit "$d"; done
  state[$m]=2
  order+=("$ko")
}
for m in "${WANT[@]}"; do visit "$m"; done
printf '%s\n' "${order[@]}" > "$out/modules.load"
echo "$stamp" > "$out/VERSION"

# Install: replace the cache dir's contents.
if [ -w "$(dirname "$DEST")" ] || [ -w "$DEST" ] 2>/dev/null; then S=""; else S=$SUDO; fi
$S mkdir -p "$DEST"
$S rm -rf "$DEST/modules" "$DEST/modules.load" "$DEST/VERSION" "$DEST/vmlinux"
$S cp -r "$out/." "$DEST/"
$S chmod -R a+rX "$DEST"
echo "install-test-kernel: installed $stamp ($kver, ${#order[@]} modules) in $DEST"
