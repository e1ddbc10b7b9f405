package inputfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// pseudoFilesystems are the kernel filesystems whose "regular files" are
// views of the kernel and of processes, not content a user meant to ship.
var pseudoFilesystems = map[int64]string{
	unix.PROC_SUPER_MAGIC:    "/proc",
	unix.SYSFS_MAGIC:         "/sys",
	unix.DEBUGFS_MAGIC:       "debugfs",
	unix.SECURITYFS_MAGIC:    "securityfs",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	unix.CGROUP_SUPER_MAGIC:  "cgroup",
	unix.BPF_FS_MAGIC:        "bpffs",
	unix.TRACEFS_MAGIC:       "tracefs",
	unix.EFIVARFS_MAGIC:      "efivarfs",
}

// pseudoFS names the kernel pseudo-filesystem f is on, or returns "".
func pseudoFS(f *os.File) string {
	// Through SyscallConn: f.Fd would put the descriptor in blocking mode.
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var st unix.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil || serr != nil {
		return ""
	}
	return pseudoFilesystems[int64(st.Type)]
}
