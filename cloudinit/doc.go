// Package cloudinit renders a vminit instance spec into the data cloud-init
// reads on first boot: user-data, vendor-data and meta-data, for the NoCloud
// datasource (YAML meta-data), the ConfigDrive datasource (OpenStack's
// meta_data.json and vendor_data.json) and the Ec2 datasource (the EC2
// instance metadata tree the metadata server serves). Every datasource
// reports the same host name: the FQDN when the spec has one, else the
// host name. Package seed lays these files out as a datasource's file
// tree; package network renders network-config.
//
// Package cloudconfig goes the other way: from a #cloud-config document
// a user already has to a spec.
//
// Every function takes a defaulted, valid spec (spec.Load returns one) and
// returns the same bytes for the same spec: no clock, no randomness, no map
// iteration order. Problems come back as spec.Errors naming the spec field,
// like validation errors.
//
// # User-data
//
// CloudConfig renders the spec as one #cloud-config document, its keys in
// the order first boot uses them (hostname, users, write_files, timezone,
// packages, bootcmd, runcmd). Decisions that are not a direct mapping:
//
//   - users starts with "default", the image's default user, so that the
//     meta-data public-keys (spec.sshAuthorizedKeys) still have a home, as
//     Ignition's "core" user always exists;
//   - a user's primaryGroup is also listed under the top-level groups key,
//     because cloud-init does not create a primary group and useradd fails
//     on a missing one;
//   - files become write_files entries, text as is and anything else
//     base64, with octal permissions as a quoted string; a file owned by
//     anyone but root is deferred to the final stage, after cloud-init has
//     created users;
//   - units and drop-ins become files under /etc/systemd/system, and runcmd
//     starts with `systemctl daemon-reload` and `systemctl enable|disable
//     --now --no-block` for units with enabled set;
//   - mounts become systemd .mount units, enabled with `systemctl enable
//     --now` before the units: cloud-init's mounts module (22.4) silently
//     skips LABEL= and UUID= devices and any device that is not a whole
//     disk present when it runs; when spec.storage makes file systems,
//     `udevadm trigger` and `udevadm settle` come first, so that udev
//     has every new label (see udevRefresh);
//   - commands go to runcmd after the systemctl calls, bootCommands to
//     bootcmd (which cloud-init runs on every boot); an argument list stays
//     a list, a string is run by the shell;
//   - with an FQDN, prefer_fqdn_over_hostname is false (the spec's hostname
//     is the short name on every distribution) and manage_etc_hosts is
//     "localhost", which maps the FQDN in /etc/hosts without rewriting it.
//
// UserData then combines that document with spec.cloudInit.userData
// (Combine). A #cloud-config document is merged with cloud-init's own merge
// rules (MergeCloudConfig), honouring its merge_how or merge_type, as if it
// were the second part of a multipart message; note that cloud-init's
// default, DefaultMergeHow, replaces a key given again, lists included, so
// a user runcmd replaces the generated one unless merge_how says to append.
// Any other kind of user-data becomes the second part of a MIME multipart
// message with a boundary derived from the content.
//
// All YAML is written with package yaml11, which quotes exactly the strings
// that cloud-init's YAML 1.1 loader would otherwise read as numbers,
// booleans or dates.
//
// # First-boot report
//
// WithReport adds to rendered user data what makes cloud-init report the
// first boot to a vminit server (package mdserver/firstboot's wire
// contract): its reporting webhook posting every event, and a unit that
// posts status.json and result.json once the final stage is over, and the
// system's state, failed units and enabled mount and swap units that are
// not active once the boot has settled (a unit cloud-init started may fail
// while cloud-init reports no error; a mount whose device never appears
// fails only as a dependency, its unit left inactive). Without systemd
// the script is started directly and sends cloud-init's word alone. The
// seed (seed.Options.ReportTo, `--report-to`) and the metadata server use
// it.
//
// # Checking user-data
//
// CheckUserData says whether cloud-init would act on a user's user-data,
// and CheckSchema what `cloud-init schema` would report about a
// #cloud-config document, against cloud-init 22.4's own schema. Its
// validator is written here (schema_validate.go) for the Draft 4 keywords
// that schema uses, over the schema as generated Go data (schema_tree.go),
// rather than with a JSON Schema library: the one vminit used cost every
// process milliseconds at init and ~20 ms to compile the schema, and
// platforms run vminit once per VM (docs/design.md, "Checking
// cloud-config").
package cloudinit
