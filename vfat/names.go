package vfat

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxNameUnits is the VFAT limit on a long name, counted in UTF-16 code
// units (what the LFN entries store), not in bytes or runes.
const maxNameUnits = 255

// checkName validates one path element as a VFAT long name.
//
// The rules are the union of what Windows and the Linux vfat driver refuse:
// control characters and `"*/:<>?\|` can never be stored, and both systems
// strip trailing dots and spaces on lookup, so a name ending in one could be
// written but never opened again under the name the caller gave.
func checkName(elem string) error {
	if elem == "" || elem == "." || elem == ".." {
		return ErrInvalidName
	}
	if !utf8.ValidString(elem) {
		return ErrInvalidName
	}
	units := 0
	for _, r := range elem {
		if r < 0x20 || strings.ContainsRune(`"*/:<>?\|`, r) {
			return ErrInvalidName
		}
		units += utf16.RuneLen(r)
	}
	if last := elem[len(elem)-1]; last == '.' || last == ' ' {
		return ErrInvalidName
	}
	if units > maxNameUnits {
		return fmt.Errorf("%w: longer than %d UTF-16 units", ErrInvalidName, maxNameUnits)
	}
	return nil
}

// foldKey is the key under which names collide. FAT lookups are
// case-insensitive on every OS, so "User-Data" and "user-data" in one
// directory would shadow each other.
func foldKey(name string) string {
	return strings.Map(unicode.ToUpper, name)
}

// shortNameChars are the characters, besides A-Z and 0-9, that an 8.3 name
// may hold. We stay inside ASCII so the short name does not depend on an OEM
// code page.
const shortNameChars = "!#$%&'()-@^_`{}~"

// shortChar maps one rune of a long name to an 8.3 character. ok is false
// when the mapping loses information (the rune was replaced by '_').
func shortChar(r rune) (c byte, ok bool) {
	switch {
	case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return byte(r), true
	case r >= 'a' && r <= 'z':
		return byte(r - 'a' + 'A'), true
	case r < utf8.RuneSelf && strings.IndexByte(shortNameChars, byte(r)) >= 0:
		return byte(r), true
	}
	return '_', false
}

// shortBasis derives the 8.3 basis name from a long name, following the
// outline of the Microsoft algorithm: upper-case, drop spaces and leading
// dots, split at the last dot, replace characters that an 8.3 name cannot
// hold by '_', truncate to 8+3. exact reports that nothing but case was lost,
// so the basis can be used without a "~N" tail.
func shortBasis(name string) (base, ext string, exact bool) {
	exact = true
	trimmed := strings.TrimLeft(name, ". ")
	if trimmed != name {
		exact = false
	}
	stem, extPart := trimmed, ""
	if i := strings.LastIndexByte(trimmed, '.'); i >= 0 {
		stem, extPart = trimmed[:i], trimmed[i+1:]
	}
	conv := func(s string, max int) string {
		var b []byte
		for _, r := range s {
			if r == ' ' || r == '.' {
				exact = false
				continue
			}
			c, ok := shortChar(r)
			if !ok {
				exact = false
			}
			b = append(b, c)
		}
		if len(b) > max {
			b = b[:max]
			exact = false
		}
		return string(b)
	}
	base = conv(stem, 8)
	ext = conv(extPart, 3)
	if base == "" {
		// Happens for names such as " .x": an 8.3 name needs a stem.
		base = "_"
		exact = false
	}
	return base, ext, exact
}

// pack11 lays out base and ext in the 11-byte, space-padded form stored in
// a directory entry.
func pack11(base, ext string) [11]byte {
	var n [11]byte
	for i := range n {
		n[i] = ' '
	}
	copy(n[:8], base)
	copy(n[8:], ext)
	return n
}

// isPlainShort reports whether name can be stored as an 8.3 entry alone,
// with no LFN entries: it must come back byte for byte from the short name.
func isPlainShort(name string) bool {
	base, ext, exact := shortBasis(name)
	if !exact {
		return false
	}
	want := base
	if ext != "" {
		want += "." + ext
	}
	return want == name
}

// shortNamer hands out unique 8.3 names within one directory.
type shortNamer struct {
	used map[[11]byte]bool
	// next remembers, per basis, where the search for a free tail resumes.
	// Once generation starts nothing is freed, so every smaller tail is
	// still taken; without this, n names sharing a basis cost O(n²).
	next map[[11]byte]int
}

func newShortNamer() *shortNamer {
	return &shortNamer{used: make(map[[11]byte]bool), next: make(map[[11]byte]int)}
}

// reserve claims the exact 8.3 form of a name. It is called first for every
// name that case-insensitively equals an 8.3 name, so that generated "~N"
// names can never take a name that another entry's long name would match.
func (s *shortNamer) reserve(name string) (sn [11]byte, ok bool) {
	base, ext, exact := shortBasis(name)
	if !exact {
		return sn, false
	}
	sn = pack11(base, ext)
	if s.used[sn] {
		return sn, false
	}
	s.used[sn] = true
	return sn, true
}

// generate returns the first free BASE~N.EXT for a name.
func (s *shortNamer) generate(name string) ([11]byte, bool) {
	base, ext, _ := shortBasis(name)
	key := pack11(base, ext)
	for n := max(1, s.next[key]); n <= 999999; n++ {
		tail := "~" + strconv.Itoa(n)
		b := base
		if len(b) > 8-len(tail) {
			b = b[:8-len(tail)]
		}
		sn := pack11(b+tail, ext)
		if !s.used[sn] {
			s.used[sn] = true
			s.next[key] = n + 1
			return sn, true
		}
	}
	return [11]byte{}, false
}

// lfnChecksum is the checksum of the 8.3 name that every LFN entry carries,
// so that a reader can tell whether the LFN entries still belong to the short
// entry that follows them.
func lfnChecksum(sn [11]byte) byte {
	var sum byte
	for _, c := range sn {
		sum = (sum>>1 | sum<<7) + c
	}
	return sum
}

// lfnSlots is the number of 32-byte LFN entries a UTF-16 name needs.
func lfnSlots(units int) int {
	return (units + 12) / 13
}

// lfnCharOffsets are the byte offsets of the 13 UTF-16 characters inside an
// LFN entry (5 + 6 + 2, around the attribute, checksum and cluster fields).
var lfnCharOffsets = [13]int{1, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30}

// putLFN writes the LFN entries for name into dst (32 bytes per slot), in
// on-disk order: the last part (sequence number | 0x40) first.
func putLFN(dst []byte, name []uint16, sum byte) {
	slots := lfnSlots(len(name))
	for i := 0; i < slots; i++ {
		seq := slots - i // on-disk order is descending
		e := dst[i*32 : i*32+32]
		e[0] = byte(seq)
		if i == 0 {
			e[0] |= 0x40
		}
		e[11] = attrLFN
		e[12] = 0
		e[13] = sum
		e[26], e[27] = 0, 0
		for j, off := range lfnCharOffsets {
			k := (seq-1)*13 + j
			var u uint16
			switch {
			case k < len(name):
				u = name[k]
			case k == len(name):
				u = 0x0000 // terminator, only when the name does not fill the slot
			default:
				u = 0xFFFF // padding after the terminator
			}
			e[off] = byte(u)
			e[off+1] = byte(u >> 8)
		}
	}
}
