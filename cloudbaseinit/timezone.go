package cloudbaseinit

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// cloudbase-init sets a time zone (its cloud-config timezone, from
// spec.timezone) by WindowsUtils.set_timezone, which maps the IANA name to
// a Windows zone through tzlocal's tz_win, Unicode CLDR's windowsZones,
// and raises "The given timezone name is unrecognised" for a name not
// there: the plugin fails and the guest keeps the image's zone. CLDR keeps
// the IANA names of its first release, so some current canonical names
// (Asia/Kolkata, Europe/Kyiv) are absent while their old links
// (Asia/Calcutta, Europe/Kiev) are there. windows_zones.go holds the
// names (TestWindowsZonesAreGenerated makes it).

// windowsZones are the IANA names cloudbase-init can set, sorted.
var windowsZones = sync.OnceValue(func() []string {
	var names []string
	area := ""
	for _, w := range strings.Fields(windowsZoneNames) {
		if strings.HasSuffix(w, "/") {
			area = w
			continue
		}
		names = append(names, area+w)
	}
	slices.Sort(names)
	return names
})

// windowsZoneAlias is windowsZoneAliases as a map.
var windowsZoneAlias = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(windowsZoneAliases), "\n") {
		name, mapped, _ := strings.Cut(line, " ")
		m[name] = mapped
	}
	return m
})

// TimezoneProblem says why cloudbase-init cannot set the time zone name,
// and what to write instead when a mapped name is the same zone (an IANA
// link of it, or the name in other letter case); "" when it can.
func TimezoneProblem(name string) string {
	zones := windowsZones()
	if _, ok := slices.BinarySearch(zones, name); ok {
		return ""
	}
	msg := fmt.Sprintf("%q is not a zone cloudbase-init can set: it maps IANA names to Windows time zones through Unicode CLDR's windowsZones (tzlocal's tz_win), which lacks this name, so its set_timezone raises \"The given timezone name is unrecognised\" and the guest keeps the image's zone", name)
	alt := windowsZoneAlias()[name]
	if alt == "" {
		if i := slices.IndexFunc(zones, func(z string) bool { return strings.EqualFold(z, name) }); i >= 0 {
			alt = zones[i]
		}
	}
	if alt != "" {
		return msg + fmt.Sprintf("; write %q, the name CLDR maps for the same zone", alt)
	}
	return msg + "; write a zone CLDR maps (docs/windows.md)"
}
