package cmdkit

import (
	"maps"
	"slices"
	"strings"

	"github.com/vminit/vminit/internal/lib/inputfile"
)

// RegularFiles refuses, naming each flag, the flags' files that exist and
// are not regular files, all at once: a FIFO would block the command in
// an open that no signal ends. A missing file is left to its reader, which
// reads through inputfile too (a file swapped for a FIFO meanwhile is an
// error there, never a hang).
func RegularFiles(files map[string]string) error {
	var problems []string
	for _, flag := range slices.Sorted(maps.Keys(files)) {
		p := files[flag]
		if p == "" {
			continue
		}
		if err := inputfile.CheckExisting(p); err != nil {
			problems = append(problems, flag+" "+err.Error())
		}
	}
	if len(problems) > 0 {
		return Usagef("%s", strings.Join(problems, "\n"))
	}
	return nil
}
