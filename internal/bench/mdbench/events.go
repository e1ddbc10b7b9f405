package mdbench

import (
	"encoding/json"
	"fmt"
)

// cloudInitBoot is the stages and modules of a cloud-init 22.4 first boot
// on Debian as its reporting webhook posts them: the init-network modules
// from the point where the user data's reporting configuration is
// applied, then modules-config and modules-final (a subset of Debian's
// module lists, to make the issue's ≈40 events).
var cloudInitBoot = []struct {
	stage   string
	modules []string
}{
	{"init-network", []string{"seed_random", "bootcmd", "write-files", "growpart", "resizefs", "set_hostname", "users-groups", "ssh"}},
	{"modules-config", []string{"locale", "timezone", "runcmd", "ssh-import-id", "set-passwords"}},
	{"modules-final", []string{"scripts-per-once", "scripts-per-instance", "scripts-user", "phone-home", "final-message"}},
}

// CloudInitEvents returns the bodies of one first boot's reporting
// events, in order, shaped as cloud-init 22.4's webhook handler posts
// them (ReportingEvent.as_dict: name, description, event_type, origin,
// timestamp, and a finish event's result).
func CloudInitEvents() [][]byte {
	var out [][]byte
	ts := 1764158400.0
	add := func(kind, name, desc, result string) {
		ev := map[string]any{"name": name, "description": desc, "event_type": kind, "origin": "cloudinit", "timestamp": ts}
		if result != "" {
			ev["result"] = result
		}
		b, err := json.Marshal(ev)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
		ts += 0.05
	}
	for i, st := range cloudInitBoot {
		if i > 0 { // init-network started before reporting was configured
			add("start", st.stage, "running modules for "+st.stage, "")
		}
		for _, m := range st.modules {
			name := st.stage + "/config-" + m
			desc := fmt.Sprintf("running config-%s with frequency once-per-instance", m)
			add("start", name, desc, "")
			add("finish", name, "config-"+m+" ran successfully", "SUCCESS")
		}
		add("finish", st.stage, "finished "+st.stage, "SUCCESS")
	}
	return out
}
