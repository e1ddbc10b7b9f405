package qemutest

import (
	"bufio"
	"fmt"
	"io"
)

// cpioWriter writes an uncompressed "newc" (SVR4, no CRC) cpio archive, the
// format the kernel unpacks into the initramfs. Only what an initramfs needs:
// directories, regular files, symlinks and device nodes, all owned by root.
type cpioWriter struct {
	w    *bufio.Writer
	ino  uint32
	off  int64
	done bool
}

func newCPIOWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: bufio.NewWriter(w), ino: 1}
}

const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

// entry writes one member. mode holds the type bits and permissions; data is
// the content of a file or the target of a symlink; rdev is major, minor of a
// device node.
func (c *cpioWriter) entry(name string, mode uint32, data []byte, rmajor, rminor uint32) error {
	nlink := uint32(1)
	if mode&0o170000 == cpioDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	c.ino++
	if err := c.write([]byte(hdr)); err != nil {
		return err
	}
	if err := c.write(append([]byte(name), 0)); err != nil {
		return err
	}
	if err := c.pad(); err != nil {
		return err
	}
	if err := c.write(data); err != nil {
		return err
	}
	return c.pad()
}

func (c *cpioWriter) Dir(name string, perm uint32) error {
	return c.entry(name, cpioDir|perm, nil, 0, 0)
}

func (c *cpioWriter) File(name string, perm uint32, data []byte) error {
	return c.entry(name, cpioFile|perm, data, 0, 0)
}

func (c *cpioWriter) Symlink(name, target string) error {
	return c.entry(name, cpioSymlink|0o777, []byte(target), 0, 0)
}

func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) error {
	return c.entry(name, cpioChar|perm, nil, major, minor)
}

// Close writes the trailer and flushes; it does not close the underlying writer.
func (c *cpioWriter) Close() error {
	if !c.done {
		c.done = true
		if err := c.entry("TRAILER!!!", 0, nil, 0, 0); err != nil {
			return err
		}
	}
	return c.w.Flush()
}

func (c *cpioWriter) write(b []byte) error {
	n, err := c.w.Write(b)
	c.off += int64(n)
	return err
}

// pad aligns to 4 bytes, as newc requires after the name and after the data.
func (c *cpioWriter) pad() error {
	if r := c.off % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}
