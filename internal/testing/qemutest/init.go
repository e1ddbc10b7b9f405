package qemutest

// initStart begins both inits: busybox's applets on PATH and the kernel's
// filesystems mounted.
const initStart = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp /mnt /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
`

// initScript is /init in the initramfs. @MARK@ is replaced by the boot's
// unique record marker. It runs /script.sh (the test's script) with the
// helpers below defined, then reports the exit status and powers off.
//
// Records go to /dev/ttyS1 (the data channel, a separate serial port from the
// kernel console on ttyS0, so kernel messages never interleave with them):
//
//	@MARK@ BEGIN <kind> <base64 name or -> [fields...]
//	<base64 of the data, wrapped>
//	@MARK@ END <exit status of the reader>
const initScript = initStart + `stty -F /dev/ttyS1 raw -echo 2>/dev/null
exec 3>/dev/ttyS1
QT_MARK=@MARK@

# qt_emit KIND NAME [FIELD...]: emit stdin as a record.
qt_emit() {
	_k=$1 _n=$2
	shift 2
	[ -n "$_n" ] && _n=$(printf %s "$_n" | base64 -w 0) || _n=-
	echo "$QT_MARK BEGIN $_k $_n $*" >&3
	base64 >&3
	echo "$QT_MARK END $?" >&3
}

# qt_emit_file FILE KIND NAME [FIELD...]: emit FILE's content as a record; a
# read error shows as a non-zero END status.
qt_emit_file() {
	_f=$1 _k=$2 _n=$3
	shift 3
	[ -n "$_n" ] && _n=$(printf %s "$_n" | base64 -w 0) || _n=-
	echo "$QT_MARK BEGIN $_k $_n $*" >&3
	base64 "$_f" >&3
	echo "$QT_MARK END $?" >&3
}

# qt_error WHAT...: report a failure; Run returns it as an error.
qt_error() {
	{ echo "$*"; dmesg | tail -n 30; } | qt_emit error "$*"
}

# qt_wait GLOB: wait up to 30 s for a path matching GLOB and print it.
qt_wait() {
	_i=0
	while [ $_i -lt 300 ]; do
		for _p in $1; do
			[ -e "$_p" ] && { echo "$_p"; return 0; }
		done
		usleep 100000
		_i=$((_i+1))
	done
	return 1
}

# qt_cdrom N: print the device node of Machine.CDROMs[N] (SCSI target N).
qt_cdrom() {
	_b=$(qt_wait "/sys/bus/scsi/devices/*:0:$1:0/block/*") || return 1
	_d=/dev/${_b##*/}
	qt_wait "$_d" >/dev/null || return 1
	echo "$_d"
}

# qt_disk N: print the device node of Machine.Disks[N] (virtio serial qtdiskN).
qt_disk() {
	_i=0
	while [ $_i -lt 300 ]; do
		for _b in /sys/block/vd*; do
			[ "$(cat "$_b/serial" 2>/dev/null)" = "qtdisk$1" ] && [ -e "/dev/${_b##*/}" ] &&
				{ echo "/dev/${_b##*/}"; return 0; }
		done
		usleep 100000
		_i=$((_i+1))
	done
	return 1
}

# qt_dumpfs TAG DIR: emit one "entry" record per file, directory and symlink
# below DIR (DIR itself excluded): name = path relative to DIR, fields = TAG,
# st_mode in hex, size, mtime, uid, gid, nlink; data = file content or link
# target.
qt_dumpfs() {
	_tag=$1
	( cd "$2" || exit 1
	find . | while IFS= read -r _p; do
		[ "$_p" = . ] && continue
		_st=$(stat -c '%f %s %Y %u %g %h' "$_p") || { qt_error "stat $_p"; continue; }
		_rel=${_p#./}
		if [ -L "$_p" ]; then
			printf %s "$(readlink "$_p")" | qt_emit entry "$_rel" "$_tag" $_st
		elif [ -f "$_p" ]; then
			qt_emit_file "$_p" entry "$_rel" "$_tag" $_st
		else
			qt_emit entry "$_rel" "$_tag" $_st </dev/null
		fi
	done )
}

# qt_mountdump TAG DEV FSTYPE OPTIONS: mount DEV on /mnt/TAG, emit its
# /proc/mounts line ("mount" record) and its files, the kernel messages that
# came with it ("dmesg" record), and unmount.
qt_mountdump() {
	_dir=/mnt/$1
	mkdir -p "$_dir"
	dmesg -c >/dev/null
	if ! mount -t "$3" -o "$4" "$2" "$_dir"; then
		qt_error "mount -t $3 -o $4 $2 ($1)"
		return 1
	fi
	grep " $_dir " /proc/mounts | qt_emit mount "$1"
	qt_dumpfs "$1" "$_dir"
	umount "$_dir" || qt_error "umount $_dir"
	dmesg | qt_emit dmesg "$1"
}

for _m in $(cat /lib/modules.load); do
	insmod "/lib/modules/$_m" || qt_error "insmod $_m"
done

( . /script.sh )
_rc=$?
uname -r | qt_emit done "" $_rc
sync
poweroff -f
`

// plainInitScript is /init in an Initramfs: no records, the script's
// output on the console.
const plainInitScript = initStart + `for _m in $(cat /lib/modules.load); do
	insmod "/lib/modules/$_m" || echo "insmod $_m failed"
done
( . /script.sh )
sync
poweroff -f
`
