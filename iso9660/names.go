package iso9660

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

const (
	// maxJolietLen is the Joliet limit in UCS-2 characters. genisoimage's
	// -joliet-long allows 103, but 64 is what every reader accepts.
	maxJolietLen = 64
	// maxDirDepth is the number of path components a directory may have:
	// ECMA-119 6.8.2.1 allows 8 directory levels and the root is level 1.
	maxDirDepth = 7
	// maxFileSize is the largest file one extent can describe.
	maxFileSize = 1<<32 - 1
)

// checkComponent validates one path component and returns its length in
// UCS-2 characters. The limits are Joliet's: the Rock Ridge name space is
// wider, but a name Windows cannot see would make the seed silently differ
// between guests.
func checkComponent(c string) (int, bool) {
	if c == "" || c == "." || c == ".." {
		return 0, false
	}
	n := 0
	for i := 0; i < len(c); {
		b := c[i]
		if b < utf8.RuneSelf {
			if b < 0x20 || b == 0x7f {
				return 0, false
			}
			switch b {
			case '*', '/', ':', ';', '?', '\\':
				return 0, false
			}
			i++
		} else {
			r, size := utf8.DecodeRuneInString(c[i:])
			// Joliet is UCS-2: no surrogate pairs, so nothing past the BMP.
			if r == utf8.RuneError || r > 0xffff || unicode.IsControl(r) {
				return 0, false
			}
			i += size
		}
		n++
	}
	if n > maxJolietLen {
		return 0, false
	}
	return n, true
}

// primaryID returns the ECMA-119 identifier for a name, level-1 style:
// [A-Z0-9_]{1,8} for directories, and that plus "." [A-Z0-9_]{0,3} ";1" for
// files, as genisoimage and xorriso do ("USER_DAT.;1"). With Rock Ridge and
// Joliet present no consumer sees it, but it has to be valid and unique.
// n > 0 replaces the tail of the base name with the decimal n to resolve a
// collision.
func primaryID(name string, dir bool, n int) string {
	base, ext := name, ""
	if !dir {
		for i := len(name) - 1; i > 0; i-- {
			if name[i] == '.' {
				base, ext = name[:i], name[i+1:]
				break
			}
		}
	}
	var buf [16]byte
	k := mangle(buf[:8], base)
	if k == 0 {
		buf[0] = '_'
		k = 1
	}
	if n > 0 {
		var num [20]byte
		s := strconv.AppendInt(num[:0], int64(n), 10)
		if len(s) > 8 {
			s = s[len(s)-8:] // only past 10^8 collisions; the caller retries
		}
		if k > 8-len(s) {
			k = 8 - len(s)
		}
		k += copy(buf[k:8], s)
	}
	if dir {
		return string(buf[:k])
	}
	buf[k] = '.'
	k++
	k += mangle(buf[k:k+3], ext)
	buf[k] = ';'
	buf[k+1] = '1'
	return string(buf[:k+2])
}

// mangle writes s upper-cased into dst, replacing every character outside
// the d-characters with '_' (one '_' per UTF-8 sequence), and returns the
// number of bytes written, at most len(dst).
func mangle(dst []byte, s string) int {
	k := 0
	for i := 0; i < len(s) && k < len(dst); {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		default:
			c = '_'
		}
		if s[i] >= utf8.RuneSelf {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		} else {
			i++
		}
		dst[k] = c
		k++
	}
	return k
}

// primaryKey is the part of an identifier that must be unique within a
// directory: name and extension without the version. A directory "FOO" and
// a file "FOO.;1" share the key "FOO.", which keeps them apart even for a
// reader that strips versions and trailing dots (Linux map=normal).
func primaryKey(id string, dir bool) string {
	if dir {
		return id + "."
	}
	return id[:len(id)-2]
}

// splitID splits an identifier into name and extension, dropping the
// version.
func splitID(id string) (name, ext string) {
	for i := 0; i < len(id); i++ {
		switch id[i] {
		case '.':
			name = id[:i]
			ext = id[i+1:]
			for j := 0; j < len(ext); j++ {
				if ext[j] == ';' {
					return name, ext[:j]
				}
			}
			return name, ext
		case ';':
			return id[:i], ""
		}
	}
	return id, ""
}

// comparePadded compares two strings as ECMA-119 9.3 orders identifiers:
// the shorter is treated as padded with spaces.
func comparePadded(a, b string) int {
	n := max(len(a), len(b))
	for i := 0; i < n; i++ {
		ca, cb := byte(' '), byte(' ')
		if i < len(a) {
			ca = a[i]
		}
		if i < len(b) {
			cb = b[i]
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	return 0
}

// comparePrimary orders primary identifiers within a directory (ECMA-119
// 9.3): by name, then extension, each space-padded. Identifiers are unique
// on (name, extension), so versions never decide.
func comparePrimary(a, b string) int {
	an, ae := splitID(a)
	bn, be := splitID(b)
	if c := comparePadded(an, bn); c != 0 {
		return c
	}
	return comparePadded(ae, be)
}

// putUCS2 writes s as UCS-2BE into dst and returns the bytes written. s has
// been validated as BMP-only UTF-8.
func putUCS2(dst []byte, s string) int {
	k := 0
	for _, r := range s {
		dst[k] = byte(r >> 8)
		dst[k+1] = byte(r)
		k += 2
	}
	return k
}
