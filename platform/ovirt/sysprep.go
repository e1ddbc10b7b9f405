package ovirt

import (
	"slices"
	"strings"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/sysprep"
	"github.com/vminit/vminit/seed"
)

// SysprepFile is the answer file's name on the engine's sysprep payload:
// osinfo's sysprepFileName, "Unattend.xml" for the Windows versions that
// read an XML answer file (sysprep.inf for XP and 2003, which read no
// XML).
const SysprepFile = "Unattend.xml"

// SysprepDisc is the engine's sysprep payload as a guest finds it: a
// floppy, or a CD-ROM where the OS has no floppy, without a volume label,
// holding SysprepFile (or sysprep.inf, which the engine writes for XP and
// 2003 and vminit does not).
var SysprepDisc = sysprep.Disc{Answers: []string{SysprepFile, "sysprep.inf"},
	How: "as the engine delivers it, on its sysprep payload (a floppy, or a CD-ROM where the OS has no floppy; no volume label of its own)"}

// MaxSysprepName is the engine's MaxVmNameLengthSysprep: the computer
// name it writes for $ComputerName$ is cut to it.
const MaxSysprepName = 15

// windowsGuest reads a body the engine gives sysprep (use_sysprep, or a
// Windows OS type) as the engine delivers it: with custom_script, that
// answer file, the $placeholders the body's fields fill replaced as the
// engine's SysprepHandler replaces them, on the payload disc; without
// one, the engine fills its own template (osinfo sysprepPath), which is
// not here, so the body is refused as unsupported. why says what made it
// Windows, at field.
func windowsGuest(doc *platform.Document, vm *ovirtsdk.Vm, in *ovirtsdk.Initialization, ip, field, why string) (*platform.Result, error) {
	script, _ := in.CustomScript()
	if strings.TrimSpace(script) == "" {
		return nil, unsupportedWindows(doc, field, why+": without a custom_script the engine fills its own answer-file template (osinfo sysprepPath), which vminit does not have; give the answer file as initialization.custom_script to have it read and passed through")
	}
	name, _ := vm.Name()
	b := platform.NewBuilder(doc, "sysprep")
	content, filled, left := fillSysprep(script, in, name)
	a, err := sysprep.Read([]byte(content))
	if err != nil {
		b.Errorf(ip+".custom_script", "the answer file is not well-formed XML: the engine passes it unchecked, and Windows setup would stop on it: %v", err)
		_, err := b.Finish("")
		return nil, err
	}
	msg := sysprep.Report(SysprepFile, a, SysprepDisc.How)
	if len(filled) > 0 {
		msg += "; placeholders filled from the body: " + strings.Join(filled, ", ")
	}
	if len(left) > 0 {
		msg += "; left as written, the engine fills them from its configuration (osinfo, engine-config): " + strings.Join(left, ", ")
	}
	b.Warnf(ip+".custom_script", "%s", msg)
	disc := &seed.Seed{Datasource: "sysprep", Files: []seed.File{{Path: SysprepFile, Data: []byte(content)}}}
	vmDesc := name
	if vmDesc == "" {
		vmDesc, _ = in.HostName()
	}
	return &platform.Result{Object: "oVirt vm " + vmDesc, Sysprep: disc, Warnings: b.Warnings}, nil
}

// fillSysprep replaces the placeholders SysprepHandler.getSysPrep replaces
// from the VM's initialization (or with "" where the engine does when the
// field is unset), and lists those it fills from its own configuration
// where the body does not say, which are left as written.
func fillSysprep(script string, in *ovirtsdk.Initialization, vmName string) (string, []string, []string) {
	get := func(f func() (string, bool)) string { v, _ := f(); return v }
	host := get(in.HostName)
	if host == "" {
		host = vmName
	}
	if len(host) > MaxSysprepName {
		host = host[:MaxSysprepName]
	}
	type ph struct {
		key, value string
		fallback   bool // unset: the engine's configuration fills it
	}
	locale := func(f func() (string, bool)) (string, bool) { v := get(f); return v, v == "" }
	var phs []ph
	add := func(key, value string, fallback bool) { phs = append(phs, ph{key, value, fallback}) }
	add("$ComputerName$", host, false)
	tz := get(in.Timezone)
	add("$TimeZone$", tz, tz == "")
	ui, uiDef := locale(in.UiLanguage)
	add("$SetupUiLanguageUiLanguage$", ui, uiDef)
	v, d := locale(in.InputLocale)
	add("$InputLocale$", v, d)
	add("$UILanguage$", ui, uiDef)
	v, d = locale(in.SystemLocale)
	add("$SystemLocale$", v, d)
	v, d = locale(in.UserLocale)
	add("$UserLocale$", v, d)
	add("$MachineObjectOU$", get(in.ActiveDirectoryOu), false)
	org := get(in.OrgName)
	add("$OrgName$", org, org == "")
	add("$AdminPassword$", get(in.RootPassword), false)
	add("$JoinDomain$", get(in.Domain), false)
	// The domain account and the product key are always the engine's.
	add("$DomainAdmin$", "", true)
	add("$DomainAdminPassword$", "", true)
	add("$ProductKey$", "", true)
	var filled, left []string
	for _, p := range phs {
		if !strings.Contains(script, p.key) {
			continue
		}
		if p.fallback {
			left = append(left, p.key)
			continue
		}
		script = strings.ReplaceAll(script, p.key, p.value)
		filled = append(filled, p.key)
	}
	return script, slices.Compact(filled), left
}
