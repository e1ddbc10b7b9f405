#!/usr/bin/env bash
# Builds the real Debian 12 guests that vminit's guest tests boot
# (internal/testing/guesttest, cmd/internal/e2e): one whose own
# cloud-init 22.4 applies our seeds, and one whose initramfs runs Debian's
# Ignition 2.14 as Fedora CoreOS does. docs/guests.md describes them.
#
# Layout of $VMINIT_TEST_GUESTS_DIR (default /var/cache/vminit-test-guests):
#   debian-cloudinit.qcow2  bootable disk (MBR, syslinux, /boot FAT + ext4 root)
#                           that boots under QEMU's default BIOS with no kernel
#                           flags, like a distribution's cloud image
#   vmlinuz, initrd.img     that root's kernel and initramfs, for direct kernel
#                           boots (root=LABEL=vminit-root)
#   ignition.qcow2          the same root prepared for an Ignition first boot
#                           (GPT, one ext4 partition named root: root=/dev/vda1)
#   initrd-ignition.img     dracut initramfs with Debian's ignition module
#   KEY                     hash of this script and the package versions it
#                           builds from; a rerun with the same KEY does nothing
#   VERSIONS                the packages installed in the guest (dpkg-query)
#
# Recipe and every trap: see docs/guests.md. Needs root (debootstrap, chroot
# with /proc mounted); re-runs itself with sudo otherwise. No loop devices and
# no mounts of the images: the file systems are made from directories
# (mkfs.ext4 -d, mtools) and placed at their partition offsets.
#
# `install-test-guests.sh --key` prints the KEY a build would have and exits
# (a CI cache key for the directory).
#
# VMINIT_TEST_GUESTS_DEBS=DIR keeps debootstrap's downloaded packages in DIR
# (--cache-dir) between builds, for developing this script.
set -euo pipefail

if [ "$(id -u)" != 0 ] && [ "${1:-}" != --key ]; then exec sudo -E "$0" "$@"; fi

DEST="${VMINIT_TEST_GUESTS_DIR:-/var/cache/vminit-test-guests}"
SUITE=bookworm
ROOT_LABEL=vminit-root
# The guests' own packages. git and make (examples/dev-vm.yaml) and nginx and
# python3 (examples/ubuntu-server) are preinstalled and the guests carry no
# apt sources, so cloud-init's package module succeeds offline: the tests'
# guests only reach the host's 127.0.0.1 servers, never a mirror.
INCLUDE=cloud-init,python3-cffi-backend,systemd,systemd-sysv,udev,linux-image-amd64
INCLUDE+=,openssh-server,iproute2,ifupdown,ifenslave,vlan,resolvconf,net-tools
INCLUDE+=,isc-dhcp-client,kmod,sudo,tzdata,git,make,nginx,python3
# Storage (spec.storage, issue 23): what cloud-init 22.4's disk_setup,
# fs_setup, growpart, resize_rootfs and swap run, and what Ignition 2.14's
# disks stage runs (dracut's ignition module copies each into the initramfs
# when the root has it): sgdisk (gdisk; GPT) and sfdisk (fdisk; MBR, and
# growpart's), growpart (cloud-guest-utils), and a mkfs for each format the
# spec has: ext4 (e2fsprogs, in minbase), xfs, btrfs, vfat. util-linux has
# the rest (wipefs, blkid, lsblk, blockdev, mkswap, swapon). No parted:
# cloud-init rereads a table with blockdev when partprobe is missing.
INCLUDE+=,gdisk,fdisk,cloud-guest-utils,xfsprogs,btrfs-progs,dosfstools
# Added to the Ignition guest's root (dracut replaces initramfs-tools there).
IGN_PACKAGES=(dbus dracut dracut-network ignition curl network-manager)

# The mirror apt already uses on this machine.
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -n1 || true)
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\(http[^ ]*\) .*/\2/p' /etc/apt/sources.list 2>/dev/null | grep -v security | head -n1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}

# KEY: this script plus the versions the mirror offers of what decides the
# guests (the host's apt lists come from the same mirror).
candidate() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p'; }
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n1 || true)
key=$( {
  sha256sum < "$0"
  echo "$mirror $SUITE"
  for p in $kpkg cloud-init systemd ifupdown "${IGN_PACKAGES[@]}"; do echo "$p $(candidate "$p")"; done
} | sha256sum | cut -d' ' -f1)

if [ "${1:-}" = --key ]; then echo "$key"; exit 0; fi

mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9
outputs=(debian-cloudinit.qcow2 vmlinuz initrd.img ignition.qcow2 initrd-ignition.img VERSIONS)
have_all() { for f in "${outputs[@]}"; do [ -s "$DEST/$f" ] || return 1; done; }
if [ -f "$DEST/KEY" ] && [ "$(cat "$DEST/KEY")" = "$key" ] && have_all; then
  echo "install-test-guests: up to date in $DEST ($key)"
  exit 0
fi

need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
missing=()
need debootstrap debootstrap
need sfdisk fdisk
need mkfs.ext4 e2fsprogs
need mkfs.fat dosfstools
need mcopy mtools
need syslinux syslinux
[ -f /usr/lib/syslinux/mbr/mbr.bin ] || missing+=(syslinux-common)
need qemu-img qemu-utils
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/var/tmp}/vminit-guests.XXXXXX")
root="$work/root"

# Unmount whatever the chroot has mounted before anything is deleted: rm -rf
# through a mounted ROOT/proc walks into the host's /proc.
unmount_all() {
  local m
  for m in $(findmnt -rn -o TARGET | grep "^$work/" | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
}
cleanup() {
  unmount_all
  if findmnt -rn -o TARGET | grep -q "^$work/"; then
    echo "install-test-guests: mounts remain under $work; not deleting it" >&2
    return
  fi
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

mount_chroot() {
  mount -t proc proc "$root/proc"
  mount -t sysfs sysfs "$root/sys"
  mount --bind /dev "$root/dev"
  mount --bind /dev/pts "$root/dev/pts"
}
in_root() { chroot "$root" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }

log() { echo "install-test-guests: $* ($(($(date +%s) - start)) s)" >&2; }

# ---- 1. Debian 12 root -------------------------------------------------------
log "debootstrap $SUITE from $mirror"
cache=()
if [ -n "${VMINIT_TEST_GUESTS_DEBS:-}" ]; then mkdir -p "$VMINIT_TEST_GUESTS_DEBS"; cache=(--cache-dir="$VMINIT_TEST_GUESTS_DEBS"); fi
debootstrap --variant=minbase "${cache[@]}" --include="$INCLUDE" "$SUITE" "$root" "$mirror" > "$work/debootstrap.log" 2>&1 ||
  { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
rm -f "$root/etc/resolv.conf" && cp /etc/resolv.conf "$root/etc/resolv.conf"
mount_chroot
# debootstrap can leave packages half-configured.
in_root dpkg --configure -a
in_root apt-get -f install -y -q
kver=$(ls "$root/lib/modules" | head -n1)

# Smaller image, faster boots: drop the documentation and the drivers a QEMU
# guest never loads (graphics, media, sound, wireless, InfiniBand, ...).
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
for d in gpu media net/wireless infiniband iio staging bluetooth isdn sound usb/serial hwmon net/ethernet/mellanox; do
  rm -rf "$root/lib/modules/$kver/kernel/drivers/$d"
done
rm -rf "$root/lib/modules/$kver/kernel/sound" "$root/lib/modules/$kver/kernel/net/wireless" "$root/lib/modules/$kver/kernel/net/mac80211" "$root/lib/modules/$kver/kernel/net/bluetooth"
in_root depmod "$kver"

# ---- 2. The cloud-init guest ----------------------------------------------------
mkdir -p "$root/etc/cloud/cloud.cfg.d"
cat > "$root/etc/cloud/cloud.cfg.d/90-vminit-test-guest.cfg" <<'EOF'
# vminit test guest (scripts/install-test-guests.sh).
# Only the datasources the tests deliver through. ds-identify keeps Ec2 and
# OpenStack out unless the SMBIOS strings `vminit run --serve` sets name them,
# so the drive paths never wait on network probes.
datasource_list: [NoCloud, ConfigDrive, Ec2, OpenStack, None]
# minbase has no locales: cloud-init's default (en_US.UTF-8) would fail.
locale: C.UTF-8
EOF
# QEMU's pc machine has a floppy controller with no disk: probing it (blkid,
# ds-identify) costs seconds of I/O errors; cloud images blacklist it too.
# Nor do the guests run VMs: no kvm modules (the loading takes seconds).
printf "blacklist %s\n" floppy kvm kvm_amd kvm_intel > "$root/etc/modprobe.d/vminit-test-guest.conf"
# QEMU's user network sends router advertisements (fec0::/64, default via
# fe80::2); a guest that takes them gets a default route before the spec's
# static IPv6 gateway, which then cannot be added. The guests' IPv6 is what
# the spec says, nothing learned. And no duplicate address detection: the
# user network has no other hosts, and under TCG on a busy machine DAD
# outlasts ifupdown's wait for it ("Waiting for DAD... Timed out"), which
# fails the interface (the bond) and every interface on it (the VLAN).
mkdir -p "$root/etc/sysctl.d"
printf 'net.ipv6.conf.%s = 0\n' all.accept_ra default.accept_ra all.accept_dad default.accept_dad \
  > "$root/etc/sysctl.d/90-vminit-test-guest.conf"
# debootstrap copies the host's hostname: remove it so cloud-init's is seen.
rm -f "$root/etc/hostname"
# Each clone gets its own machine-id (and systemd's first-boot presets).
: > "$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
cat > "$root/etc/fstab" <<EOF
LABEL=$ROOT_LABEL / ext4 defaults,errors=remount-ro 0 1
EOF
# A small initramfs: only the drivers to find the root disk and the seed
# drive, not MODULES=most (which cannot guess in a chroot and takes 4x as
# long to unpack under TCG). The seed's CD-ROM driver must be in it: cloud-init's
# ds-identify looks for the "cidata"/"config-2" label from a systemd
# generator, before udev loads modules from the root; without sr_mod there
# it finds no CD and disables cloud-init.
sed -i 's/^MODULES=.*/MODULES=list/' "$root/etc/initramfs-tools/initramfs.conf"
printf '%s\n' virtio_pci virtio_blk virtio_scsi sd_mod sr_mod cdrom ahci ata_piix nvme ext4 > "$root/etc/initramfs-tools/modules"

# The report: the state the tests check, on ttyS0 between markers, once the
# agent is done; then power off so QEMU exits. The serial getty is masked:
# agetty hangs the line up under the report.
install -m 0755 /dev/stdin "$root/usr/local/sbin/vminit-guest-report" <<'EOF'
#!/bin/sh
# vminit test guest: print what the tests check on ttyS0, then power off.
# Every line of the report starts with "VMR|" so kernel and journal messages
# that interleave on the console can be told apart.
agent=cloud-init
[ -e /etc/cloud/cloud-init.disabled ] && agent=ignition
mkdir -p /var/lib/vminit-guest
n=$(cat /var/lib/vminit-guest/boots 2>/dev/null || echo 0); n=$((n + 1))
echo "$n" > /var/lib/vminit-guest/boots
if [ "$agent" = cloud-init ]; then
  cloud-init status --wait >/dev/null 2>&1
fi
# Let the units the agent started settle: wait (up to 120 s) until no job but
# targets, devices (a spec's nofail mount of an absent disk waits 90 s for
# it) and this one is queued.
i=0
while [ $i -lt 120 ] && systemctl list-jobs --no-legend 2>/dev/null |
      awk '{print $2}' | grep -v -e '\.target$' -e '\.device$' -e '^vminit-guest-report' | grep -q .; do
  sleep 1; i=$((i + 1))
done
dmesg -n 1 2>/dev/null
sec() { echo "## $*"; }
file() { # file PATH: stat line, then the content of a small text file
  [ -e "$1" ] || [ -L "$1" ] || return 0
  echo "## file $1 $(stat -c '%a %U %G %F' "$1")"
  if [ -f "$1" ] && [ "$(stat -c %s "$1")" -le 8192 ]; then
    cat "$1"; [ -z "$(tail -c 1 "$1")" ] || echo
  fi
}
units() { # unit files the agent could have written, plus some known ones
  for f in /etc/systemd/system/*.service /etc/systemd/system/*.mount /etc/systemd/system/*.d; do
    [ -e "$f" ] || continue
    b=${f##*/}; b=${b%.d}
    case "$b" in *@.*) continue ;; esac # templates
    echo "$b"
  done
  echo nginx.service; echo ssh.service
}
report() {
  sec agent "$agent"
  sec boot "$n"
  if [ "$agent" = cloud-init ]; then
    sec cloud-init-status; cloud-init status --long 2>&1
    sec cloud-init-result; cat /run/cloud-init/result.json 2>&1
    # cloud-init 22.4 logs a module's partial failure (a file system
    # disk_setup could not make, say) as a warning and reports no error.
    sec cloud-init-warnings
    # Each such line with the lines that continue it (a command's stderr).
    awk '/^[0-9]+-[0-9]+-[0-9]+ [0-9:,]+ - /{ p = /\[(WARNING|ERROR|CRITICAL)\]/ } p' \
      /var/log/cloud-init.log 2>/dev/null | tail -n 60
  else
    sec ignition-journal; journalctl -b -o cat -t ignition -p warning --no-pager 2>&1 | tail -n 40
    sec ignition-units
    systemctl show -p Id,ActiveState,Result ignition-files.service ignition-fetch.service 2>&1
  fi
  sec hostname; hostname
  sec hostname-fqdn; hostname -f 2>&1
  sec timezone; readlink /etc/localtime
  sec passwd; getent passwd
  sec group; getent group
  sec shadow; cut -d: -f1,2 /etc/shadow | sed 's/:\(..\).*/:\1/'
  for h in /root /home/*; do
    for k in "$h"/.ssh/authorized_keys "$h"/.ssh/authorized_keys.d/*; do file "$k"; done
  done
  for f in /etc/sudoers.d/* /etc/hosts /etc/hostname /etc/motd /etc/motd.d/* /etc/fstab \
           /etc/nginx/conf.d/* /var/log/first-boot.log /etc/network/interfaces.d/* \
           /etc/NetworkManager/system-connections/* /etc/systemd/network/* \
           /etc/systemd/system/*.service /etc/systemd/system/*.mount /etc/systemd/system/*.d/*; do
    file "$f"
  done
  for d in /srv /var/srv /etc/vminit /var/lib/vminit /var/lib/vminit-test; do
    [ -d "$d" ] && find "$d" -mindepth 1 | sort | while read -r f; do file "$f"; done
  done
  sec units
  units | sort -u | while read -r u; do
    systemctl show -p Id,UnitFileState,ActiveState,SubState,Result,DropInPaths "$u" | tr '\n' ' '; echo
  done
  # The boot's warnings, kernel and udev included (a udev worker killed
  # on a slow guest leaves a device without its by-label link).
  sec warnings; journalctl -b -p warning -o short-monotonic --no-pager 2>&1 | tail -n 60
  sec failed-units; systemctl list-units --failed --plain --no-legend
  systemctl list-units --failed --plain --no-legend | awk '{print $1}' | while read -r u; do
    sec journal "$u"; journalctl -b -u "$u" -o cat --no-pager | tail -n 20
  done
  sec link; ip -o link
  sec addr; ip -o addr
  sec route; ip route
  sec route6; ip -6 route
  sec resolv.conf; cat /etc/resolv.conf
  for b in /proc/net/bonding/*; do [ -e "$b" ] && { sec "bonding ${b##*/}"; cat "$b"; }; done
  [ -e /proc/net/vlan/config ] && { sec vlan; cat /proc/net/vlan/config; }
  sec mounts; findmnt -rn -o TARGET,SOURCE,FSTYPE
  # Storage: block devices with their tables, partitions, file systems,
  # labels and sizes (bytes; FSSIZE of the mounted ones), and active swap.
  sec lsblk
  lsblk -J -b -o NAME,PATH,TYPE,SIZE,PTTYPE,PARTLABEL,PARTTYPE,FSTYPE,LABEL,UUID,FSSIZE,MOUNTPOINT 2>&1
  sec swaps; swapon --show=NAME,TYPE,SIZE --bytes --raw --noheadings 2>&1
}
{
  echo "-----BEGIN VMINIT GUEST REPORT-----"
  report 2>&1 | sed 's/^/VMR|/'
  echo "-----END VMINIT GUEST REPORT-----"
} > /dev/ttyS0
sync
sleep 2
poweroff -f
EOF
cat > "$root/etc/systemd/system/vminit-guest-report.service" <<'EOF'
[Unit]
Description=vminit test guest: report the first boot's state on ttyS0 and power off
# After the agent: ordering it under multi-user.target instead creates a cycle.
After=cloud-final.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/vminit-guest-report
StandardOutput=journal

[Install]
WantedBy=cloud-final.service
EOF
in_root systemctl enable vminit-guest-report.service
in_root systemctl mask serial-getty@ttyS0.service
# No package sources: the guests' package installs are offline no-ops.
: > "$root/etc/apt/sources.list"
in_root apt-get clean
rm -rf "$root"/var/lib/apt/lists/*
in_root update-initramfs -u -k "$kver" >/dev/null
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
in_root dpkg-query -W > "$work/VERSIONS"

# The disk. Boot loader: syslinux, because its mtools variant installs onto
# an unmounted FAT file system at an offset inside the disk file
# (syslinux --install --offset), with its mbr.bin in the first 440 bytes: no
# loop device, no mount, no grub-install device map. The kernel and
# initramfs are copied to that FAT /boot partition (partition 1, active);
# the root is partition 2, found by its label.
MiB=$((1024 * 1024))
BOOT_MB=64
root_image() { # root_image DIR OUT: an ext4 file system with DIR's files
  mkfs.ext4 -q -F -L "$ROOT_LABEL" -E root_owner=0:0 -d "$1" "$2" 3G
}
make_cloud_disk() {
  local disk="$work/cloud.raw" start2=$((1 + BOOT_MB))
  rm -f "$root/etc/resolv.conf"
  ln -s /run/resolvconf/resolv.conf "$root/etc/resolv.conf"
  umount "$root/dev/pts" "$root/dev" "$root/sys" "$root/proc"
  root_image "$root" "$work/root.ext4"
  truncate -s $(( (start2 + 3 * 1024 + 1) * MiB )) "$disk"
  sfdisk -q "$disk" <<EOF
label: dos
start=1MiB, size=${BOOT_MB}MiB, type=c, bootable
start=${start2}MiB, size=3GiB, type=83
EOF
  mkfs.fat -F 16 -n VMBOOT --offset=2048 "$disk" $((BOOT_MB * 1024)) >/dev/null
  cat > "$work/syslinux.cfg" <<EOF
SERIAL 0 115200
DEFAULT debian
PROMPT 0
TIMEOUT 0
LABEL debian
  KERNEL /vmlinuz
  INITRD /initrd.img
  APPEND root=LABEL=$ROOT_LABEL rw console=tty0 console=ttyS0,115200n8
EOF
  mcopy -i "$disk@@$MiB" "$work/vmlinuz" "$work/initrd.img" "$work/syslinux.cfg" ::/
  syslinux --install --offset $MiB "$disk"
  dd if=/usr/lib/syslinux/mbr/mbr.bin of="$disk" bs=440 count=1 conv=notrunc status=none
  dd if="$work/root.ext4" of="$disk" bs=1M seek="$start2" conv=notrunc,sparse status=none
  rm -f "$work/root.ext4"
  qemu-img convert -c -o compression_type=zstd -O qcow2 "$disk" "$work/debian-cloudinit.qcow2"
  rm -f "$disk"
}
log "cloud-init guest: disk"
make_cloud_disk

# ---- 3. The Ignition guest: the same root, Ignition in a dracut initramfs -------
log "Ignition guest"
mount_chroot
rm -f "$root/etc/resolv.conf"; cp /etc/resolv.conf "$root/etc/resolv.conf"
echo "deb $mirror $SUITE main" > "$root/etc/apt/sources.list"
in_root apt-get update -q >/dev/null
in_root apt-get install -y -q --no-install-recommends "${IGN_PACKAGES[@]}" >/dev/null
: > "$root/etc/apt/sources.list"
in_root apt-get clean
rm -rf "$root"/var/lib/apt/lists/*
touch "$root/etc/cloud/cloud-init.disabled"
# Debian's Ignition always relabels for SELinux: give it a config and a
# setfiles that does nothing (dracut copies it into the initramfs).
mkdir -p "$root/etc/selinux"
printf 'SELINUX=disabled\nSELINUXTYPE=targeted\n' > "$root/etc/selinux/config"
printf '#!/bin/sh\nexit 0\n' > "$root/usr/sbin/setfiles"; chmod 0755 "$root/usr/sbin/setfiles"
# Fedora CoreOS' base groups that configs name (wheel for sudo).
in_root groupadd -f wheel
# The root's disk is GPT with the placeholder disk GUID Fedora CoreOS images
# carry. As FCOS' coreos-gpt-setup does, the first boot's initramfs moves the
# backup header to the end of the disk (and randomizes the GUID) before
# Ignition's disks stage: a disk image given more size than it was built
# with keeps its backup header in the middle, and sgdisk would grow the root
# partition (Ignition's `resize`) only up to there.
gpt_mod="$root/usr/lib/dracut/modules.d/50vminit-gpt-setup"
mkdir -p "$gpt_mod"
install -m 0755 /dev/stdin "$gpt_mod/module-setup.sh" <<'EOF'
#!/bin/bash
# vminit test guest (scripts/install-test-guests.sh): coreos-gpt-setup's job.
check() { return 255; } # only when asked (dracut --add)
depends() { echo systemd; }
install() {
    inst_multiple lsblk sgdisk udevadm
    inst_script "$moddir/vminit-gpt-setup.sh" /usr/sbin/vminit-gpt-setup
    inst_simple "$moddir/vminit-gpt-setup.service" "$systemdsystemunitdir/vminit-gpt-setup.service"
    # ignition-diskful.target is wanted on Ignition's first boot only.
    mkdir -p "$initdir/$systemdsystemunitdir/ignition-diskful.target.requires"
    ln_r "../vminit-gpt-setup.service" "$systemdsystemunitdir/ignition-diskful.target.requires/vminit-gpt-setup.service"
}
EOF
install -m 0755 /dev/stdin "$gpt_mod/vminit-gpt-setup.sh" <<'EOF'
#!/bin/sh
# Move DISK's backup GPT header to its end, once: while the disk GUID is the
# image's placeholder.
set -e
[ "$(lsblk -dno PTUUID "$1")" = 00000000-0000-4000-a000-000000000001 ] || exit 0
sgdisk --disk-guid=R --move-second-header "$1"
udevadm settle
EOF
cat > "$gpt_mod/vminit-gpt-setup.service" <<'EOF'
[Unit]
Description=vminit test guest: GPT backup header to the end of the root's disk
ConditionPathExists=/etc/initrd-release
DefaultDependencies=no
BindsTo=dev-vda.device
After=dev-vda.device systemd-udevd.service
Before=ignition-disks.service sysroot.mount

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/vminit-gpt-setup /dev/vda
EOF
# The file system drivers of every format spec.storage has, for Ignition's
# mount stage (it mounts the filesystems that have a path).
in_root dracut --no-hostonly --no-hostonly-cmdline --add "ignition vminit-gpt-setup" --omit plymouth \
  --add-drivers "qemu_fw_cfg virtio_blk virtio_pci virtio_net virtio_scsi ext4 xfs btrfs isofs vfat nls_cp437 nls_iso8859_1 nls_utf8" \
  --force /boot/initrd-ignition.img "$kver" >/dev/null 2>&1
mv "$root/boot/initrd-ignition.img" "$work/initrd-ignition.img"
# The guest boots its kernel directly (vmlinuz, initrd-ignition.img from the
# cache): the root needs no initramfs of its own.
rm -f "$root"/boot/initrd.img-*
# The report after multi-user.target and the first-boot commands vminit adds.
sed -i -e 's/^After=.*/After=multi-user.target vminit-first-boot.service/' \
       -e 's/^WantedBy=.*/WantedBy=multi-user.target/' \
       -e 's/^# After the agent.*/# After the units Ignition enabled and the first-boot commands./' \
       "$root/etc/systemd/system/vminit-guest-report.service"
rm -f "$root/etc/systemd/system/cloud-final.service.wants/vminit-guest-report.service"
in_root systemctl enable vminit-guest-report.service
# A first boot for systemd: units Ignition enables are enabled through
# presets, which systemd applies only when /etc/machine-id says
# "uninitialized" (an empty file is not a first boot for systemd 252).
echo uninitialized > "$root/etc/machine-id"
# That first boot would also enable systemd-networkd (upstream's presets),
# which then fights NetworkManager (what Fedora CoreOS and vminit's fcos
# variant use) and holds the boot in systemd-networkd-wait-online.
mkdir -p "$root/etc/systemd/system-preset"
printf '%s\n' "disable systemd-networkd.service" "disable systemd-networkd.socket" \
  "disable systemd-networkd-wait-online.service" > "$root/etc/systemd/system-preset/10-vminit-test-guest.preset"
rm -f "$root/var/lib/dbus/machine-id"
# x-systemd.growfs: the root file system fills its partition at each boot
# (systemd-growfs-root.service), once Ignition has grown the partition; on
# Fedora CoreOS ignition-ostree-growfs does that.
echo "/dev/vda1 / ext4 defaults,errors=remount-ro,x-systemd.growfs 0 1" > "$root/etc/fstab"
in_root dpkg-query -W > "$work/VERSIONS.ignition"
rm -f "$root/etc/resolv.conf"; ln -s /run/resolvconf/resolv.conf "$root/etc/resolv.conf"
umount "$root/dev/pts" "$root/dev" "$root/sys" "$root/proc"
root_image "$root" "$work/root.ext4"
truncate -s $(( (1 + 3 * 1024 + 1) * MiB )) "$work/ign.raw"
sfdisk -q "$work/ign.raw" <<EOF
label: gpt
label-id: 00000000-0000-4000-a000-000000000001
start=1MiB, size=3GiB, type=linux, name=root, uuid=00000000-0000-4000-a000-000000000002
EOF
dd if="$work/root.ext4" of="$work/ign.raw" bs=1M seek=1 conv=notrunc,sparse status=none
rm -f "$work/root.ext4"
qemu-img convert -c -o compression_type=zstd -O qcow2 "$work/ign.raw" "$work/ignition.qcow2"
rm -f "$work/ign.raw"
{ echo "# cloud-init guest"; cat "$work/VERSIONS"; echo "# Ignition guest"; cat "$work/VERSIONS.ignition"; } > "$work/VERSIONS.all"
mv "$work/VERSIONS.all" "$work/VERSIONS"

# ---- 4. Install into the cache ------------------------------------------------------
rm -f "$DEST/KEY"
for f in "${outputs[@]}"; do mv -f "$work/$f" "$DEST/$f"; done
chmod a+r "$DEST"/*
echo "$key" > "$DEST/KEY"
log "built in $DEST: $(du -sh "$DEST" | cut -f1)"
