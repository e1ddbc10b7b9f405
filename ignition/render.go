// Package ignition renders an instance spec to an Ignition config for
// Fedora CoreOS, RHCOS and Flatcar, with the same meaning as the cloud-init
// rendering of the same spec: the same users, files, units, mounts, network
// and first-boot commands.
//
// The config is built with the types of github.com/coreos/ignition/v2,
// merged with the user's own Ignition (spec.ignition.config) and Butane
// (spec.ignition.butane) by Ignition's merge rules, and validated by
// Ignition's own validator for the exact spec version emitted. Output is
// compact JSON in the order of Ignition's schema, as Butane writes it,
// without the empty objects and nulls encoding/json writes for unset
// fields, and the same bytes for the same spec.
//
// Every validation rule is Ignition's (each type's Validate method and its
// duplicate check); only the walk that reaches the values is this
// package's, because vcontext's works out each struct's fields, JSON
// names and paths again at every node, some 40 % of a render's time. The
// walk skips a validator only where a narrow test of the value shows the
// validator would report nothing (a data URL in the form the renderer
// writes, a unit file in the plain form, lists without a repeated key);
// anything else goes to the validator, and fuzz tests hold each of those
// tests to it. A user config with nothing to report is likewise decoded
// and validated without the tree of JSON positions Ignition's parser
// builds for its messages; one with anything to report goes through the
// parser.
//
// # Spec versions
//
// By default Render emits the lowest stable spec version that can express
// the config, so that the widest range of guests accepts it: 3.0.0, unless
// a file has setuid, setgid or sticky bits (honoured only from 3.6.0),
// spec.storage.growRoot resizes the root partition (3.2.0), or a merged
// config uses something newer. Whether a merged config fits an older
// version is decided by Ignition itself: the version's types must have
// every key the config uses, Ignition's validation for the version must
// find nothing new, and Ignition's translation must carry the config back
// up to exactly the same config. Only the lowest version whose types have
// every key is tried (and the next if it fails), so the config is decoded
// and validated in one or two versions, not in each. Options.Version
// forces a version ("3.0.0" … "3.6.0", or the legacy "2.2.0" and "2.3.0",
// translated with ign-converter for RHCOS before 4.6 and Flatcar's spec 2
// readers); a config the forced version cannot express is an error naming
// the version that can. Experimental versions are never emitted.
//
// # How the spec maps
//
//   - users: passwd.users. A locked password (lockPassword, the default
//     without passwordHash) is the hash "!", what `passwd -l` leaves on an
//     account without a password, so users that already exist in the image
//     are locked too, as cloud-init's lock_passwd locks them; a locked
//     passwordHash gets a "!" prefix, as `passwd -l` adds. A system user
//     gets no home directory (noCreateHome), as cloud-init's system: true.
//     spec.sshAuthorizedKeys go to the image's "core" user. A primary group,
//     and a supplementary group that is not in the images' /etc/group, is
//     created with passwd.groups, as cloud-init creates missing groups.
//   - sudo: /etc/sudoers.d/vminit-<user>, mode 0440. The prefix names the
//     file's origin and sorts it after the images' own files, so that the
//     rule is the last match, as cloud-init's 90-cloud-init-users.
//   - hostname: /etc/hostname holds the short name, as cloud-init's
//     rendering (prefer_fqdn_over_hostname: false) leaves it. With an FQDN,
//     "127.0.0.1 FQDN HOSTNAME" is appended to /etc/hosts (to a spec.files
//     /etc/hosts, when there is one), the line cloud-init's
//     manage_etc_hosts: localhost adds on the Fedora family, so that
//     `hostname --fqdn` resolves the same on both.
//   - files: storage.files with data: URLs (the shortest of percent-encoded,
//     base64 and, from 1 KiB, gzip+base64 with compression "gzip";
//     deterministic bytes), overwrite true (cloud-init's write_files
//     replaces files) or append. Directories between a user's home and a
//     file that user owns are created owned by the user.
//   - units and mounts: systemd.units; mounts as .mount units named like
//     `systemd-escape --path`, the same units the cloud-init rendering writes.
//   - commands: /etc/vminit/first-boot.sh run by vminit-first-boot.service
//     once, late in the first boot (after network-online.target and
//     multi-user.target, where cloud-init's runcmd runs), guarded by the stamp
//     /var/lib/vminit/first-boot.done, which is written before the commands
//     run: like cloud-init's per-instance semaphore, a failed run is not
//     repeated. As in cloud-init's runcmd, a failing command does not stop
//     the next ones; each failure is named in the journal, and the unit
//     fails if any command did.
//   - bootCommands: /etc/vminit/boot.sh run by vminit-boot.service on every
//     boot, where cloud-init's bootcmd runs: after the network service has
//     started (and after the wait-online services when something wants them),
//     before network-online.target, sshd and user logins; INSTANCE_ID is
//     set as cloud-init sets it. Unlike bootcmd on a first boot, it runs
//     after the users and files exist: Ignition wrote them in the initramfs.
//   - timezone: the /etc/localtime link timedatectl writes.
//   - network: NetworkManager keyfiles for fcos and rhcos, systemd-networkd
//     files for flatcar (package network).
//   - storage: storage.disks (GPT partitions sized in MiB, typeGuid) and
//     storage.filesystems with wipeFilesystem written out (false: an
//     existing filesystem of the format is kept, anything else fails the
//     boot); a swap filesystem also gets the .swap unit the cloud-init
//     rendering writes. growRoot: the root partition of Fedora CoreOS and
//     RHCOS resized to fill its disk (spec 3.2.0); Flatcar grows its root
//     itself. Shares of a disk (%), a swap file and growRoot: false are
//     errors, as packages are.
//   - packages: an error (Ignition cannot install packages: layer them with
//     rpm-ostree or a systemd-sysext image), or a warning with
//     Options.AllowPartial.
//   - cloudInit: ignored with a warning (an error with Options.Strict).
//   - Options.ReportTo (not the spec: `--report-to URL`, or the metadata
//     server that serves the config): /etc/vminit/first-boot-report.sh run by
//     vminit-first-boot-report.service, enabled, once the first boot has
//     settled (`systemctl is-system-running --wait`); it posts the system's
//     state and its failed units, each with the tail of its journal, to the
//     vminit server with curl, once (the marker
//     /var/lib/vminit/first-boot-reported).
package ignition

import (
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/go-semver/semver"
	types "github.com/coreos/ignition/v2/config/v3_0/types"

	"github.com/vminit/vminit/bootreport"
	"github.com/vminit/vminit/spec"
)

// ErrUnknownVariant is returned by Render for a Variant it does not know.
var ErrUnknownVariant = errors.New("unknown Ignition variant")

// Variant is the guest distribution family; it decides conventions the
// spec leaves open, such as how network settings are written.
type Variant string

// The variants Render knows.
const (
	FCOS    Variant = "fcos"    // Fedora CoreOS
	RHCOS   Variant = "rhcos"   // Red Hat Enterprise Linux CoreOS
	Flatcar Variant = "flatcar" // Flatcar Container Linux
)

// DefaultUser is the account every CoreOS-family image has; spec-level SSH
// keys (cloud-init's meta-data public-keys) go to it.
const DefaultUser = "core"

// Options tune Render.
type Options struct {
	// Variant defaults to the spec's ignition.variant, else FCOS.
	Variant Variant
	// Version forces the emitted spec version: "3.0.0" … "3.6.0", "2.2.0"
	// or "2.3.0" (Versions lists them). Empty means the spec's
	// ignition.version, else the lowest stable version that can express
	// the config.
	Version string
	// AllowPartial turns spec features Ignition cannot express (packages,
	// memberships in groups Ignition cannot see) into warnings, dropping
	// them, instead of errors.
	AllowPartial bool
	// Strict turns warnings about the spec and the user's Ignition and
	// Butane (unused keys, ignored cloudInit data, units enabled without an
	// [Install] section) into errors.
	Strict bool
	// FilesDir is the directory Butane's local: references
	// (contents.local, ssh_authorized_keys_local…) are relative to; empty
	// forbids them.
	FilesDir string
	// ReportTo, the base URL of a vminit server (bootreport.ParseBaseURL),
	// adds bootreport.ReportUnit: once the first boot has settled, it posts
	// the system's state and failed units to the server (report.go).
	ReportTo string
}

// Result is a rendered config.
type Result struct {
	// Config is the Ignition config: compact JSON, fields in the order of
	// Ignition's schema, unset fields left out.
	Config []byte
	// Version is its spec version, e.g. "3.0.0".
	Version string
	// Warnings are problems that did not stop the rendering, each naming
	// the spec field it concerns.
	Warnings []string
}

// Render renders a defaulted, valid instance (spec.Load gives one).
// Problems with the spec come back as spec.Errors naming the field.
func Render(inst *spec.Instance, opts Options) (*Result, error) {
	if opts.Variant == "" {
		opts.Variant = Variant(inst.Spec.Ignition.Variant)
	}
	if opts.Variant == "" {
		opts.Variant = FCOS
	}
	if opts.Version == "" {
		opts.Version = inst.Spec.Ignition.Version
	}
	switch opts.Variant {
	case FCOS, RHCOS, Flatcar:
	default:
		return nil, fmt.Errorf("%w %q (want fcos, rhcos or flatcar)", ErrUnknownVariant, opts.Variant)
	}
	if opts.ReportTo != "" {
		base, err := bootreport.ParseBaseURL(opts.ReportTo)
		if err != nil {
			return nil, fmt.Errorf("report URL %q: %w", opts.ReportTo, err)
		}
		opts.ReportTo = base
	}
	r := &renderer{inst: inst, opts: opts, floor: v300, claims: spec.PathClaims{}}
	if opts.Version != "" {
		sv, ok := lookupVersion(opts.Version)
		if !ok {
			return nil, fmt.Errorf("spec version %q is not an Ignition spec version: want one of %s", opts.Version, strings.Join(Versions(), ", "))
		}
		r.forced = &sv
	}
	cfg := r.build()
	if err := r.errs.Err(); err != nil {
		return nil, err
	}
	return r.finish(&cfg)
}

type renderer struct {
	inst     *spec.Instance
	opts     Options
	forced   *specVersion
	errs     spec.ErrorList
	warnings []string
	// floor is the lowest spec version the generated config needs, and
	// floorField and floorWhy the feature that needs it.
	floor                semver.Version
	floorField, floorWhy string
	// claims maps each path the config writes to the spec field that
	// writes it, to report two fields writing one file.
	claims spec.PathClaims
	// dirs are the directories created for ownership, by path.
	dirs map[string]bool
	// generated are configs the renderer writes in types newer than spec
	// 3.0.0's (growRoot's partition resize), merged before the user's as
	// children, so that the version machinery decides what they need.
	generated []child
}

// warn records a warning about field, an error under Strict.
func (r *renderer) warn(field, format string, args ...any) {
	if r.opts.Strict {
		r.errs.Add(field, format+" (an error with Strict / --strict)", args...)
		return
	}
	r.warnings = append(r.warnings, field+": "+fmt.Sprintf(format, args...))
}

// unsupported reports a spec feature Ignition cannot express: an error,
// or, with AllowPartial, a warning (the feature is dropped).
func (r *renderer) unsupported(field, format string, args ...any) {
	if r.opts.AllowPartial {
		r.warnings = append(r.warnings, field+": "+fmt.Sprintf(format, args...)+"; dropped (AllowPartial)")
		return
	}
	r.errs.Add(field, format+" (AllowPartial / --allow-partial drops it with a warning)", args...)
}

// needs raises the lowest spec version the generated config needs.
func (r *renderer) needs(v semver.Version, field, why string) {
	if r.floor.LessThan(v) {
		r.floor, r.floorField, r.floorWhy = v, field, why
	}
}

// claim records that field writes p, and reports a second writer.
func (r *renderer) claim(p, field string) bool { return r.claims.Claim(&r.errs, p, field) }

// build renders the spec's own part of the config. It uses only spec 3.0.0
// fields, which every later 3.x version has unchanged, so stamping the
// target version is its whole translation.
func (r *renderer) build() types.Config {
	s := &r.inst.Spec
	var cfg types.Config
	cfg.Ignition.Version = "3.0.0"

	// Generated paths are claimed first, so that a conflict is reported
	// on the spec.files entry rather than on, say, spec.hostname.
	if s.Hostname != "" && r.claim("/etc/hostname", "spec.hostname") {
		r.addFile(&cfg, "/etc/hostname", []byte(s.Hostname+"\n"), 0o644, "", false)
	}
	r.users(&cfg)
	r.hostKeys(&cfg)
	if s.Timezone != "" && r.claim("/etc/localtime", "spec.timezone") {
		cfg.Storage.Links = append(cfg.Storage.Links, types.Link{
			Node:          types.Node{Path: "/etc/localtime", Overwrite: boolPtr(true)},
			LinkEmbedded1: types.LinkEmbedded1{Target: "../usr/share/zoneinfo/" + s.Timezone},
		})
	}
	r.commandUnits(&cfg)
	if r.opts.ReportTo != "" {
		r.bootReport(&cfg, r.opts.ReportTo)
	}
	if s.Network != nil {
		r.network(&cfg)
	}
	r.units(&cfg)
	r.storage(&cfg)
	r.files(&cfg)
	// An /etc/hosts from spec.files got the FQDN's line in r.files.
	if _, written := r.claims[hostsFile]; !written && r.hostsLine() != "" && r.claim(hostsFile, "spec.fqdn") {
		r.addFile(&cfg, hostsFile, []byte(r.hostsLine()), 0o644, "", true)
	}

	if s.NTP != nil {
		r.unsupported("spec.ntp", "Ignition configures no time service: write chrony's configuration (/etc/chrony.conf on Fedora CoreOS and RHCOS) or systemd-timesyncd's (a drop-in in /etc/systemd/timesyncd.conf.d/ on Flatcar) with spec.files")
	}
	if len(s.Packages) > 0 {
		r.unsupported("spec.packages", "Ignition cannot install packages; layer them with rpm-ostree (Fedora CoreOS, RHCOS) or a systemd-sysext image (Flatcar)")
	}
	// Meta-data is no part of a config: the drives that carry one carry
	// it too (delivery.Seed), where Afterburn reads it.
	ci := &s.CloudInit
	if ci.UserData != "" || ci.VendorData != "" {
		r.warn("spec.cloudInit", "cloud-init data has no meaning to Ignition and is left out; express it with the spec's own fields or spec.ignition")
	}
	return cfg
}

func strPtr(s string) *string { return &s }
func boolPtr(b bool) *bool    { return &b }
func intPtr(i int) *int       { return &i }

func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
