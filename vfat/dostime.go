package vfat

import "time"

// dosTime is a FAT date/time pair: local wall-clock time, no zone, 2-second
// resolution, years 1980–2107.
type dosTime struct {
	date, time uint16
}

// fatEpoch is the earliest time a FAT entry can hold; a zero ModTime maps to
// it rather than to whatever a host clock says.
var fatEpoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// toDOSTime encodes the wall clock of t in t's own location (FAT stores local
// time; the caller chooses which "local" by the time.Time it passes). Times
// outside the representable range are clamped so that every input produces
// a valid entry.
func toDOSTime(t time.Time) dosTime {
	if t.IsZero() {
		t = fatEpoch
	}
	y := t.Year()
	switch {
	case y < 1980:
		return dosTime{date: 1<<5 | 1} // 1980-01-01 00:00:00
	case y > 2107:
		return dosTime{date: 127<<9 | 12<<5 | 31, time: 23<<11 | 59<<5 | 29}
	}
	return dosTime{
		date: uint16(y-1980)<<9 | uint16(t.Month())<<5 | uint16(t.Day()),
		time: uint16(t.Hour())<<11 | uint16(t.Minute())<<5 | uint16(t.Second()/2),
	}
}

// fromDOSTime decodes a FAT date/time. FAT carries no zone, so the result is
// reported in UTC with the stored wall-clock fields; invalid fields are
// normalised by time.Date rather than rejected, as every FAT driver does.
func fromDOSTime(date, tm uint16) time.Time {
	return time.Date(1980+int(date>>9), time.Month(date>>5&0xF), int(date&0x1F),
		int(tm>>11), int(tm>>5&0x3F), 2*int(tm&0x1F), 0, time.UTC)
}
