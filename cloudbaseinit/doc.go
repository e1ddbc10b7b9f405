// Package cloudbaseinit gives an instance spec its Windows meaning: what
// cloudbase-init (1.1.9), the first-boot agent of Windows cloud images,
// reads from the same seeds and metadata dialects that cloud-init reads.
//
// cloudbase-init takes the instance's identity from the metadata (its
// ConfigDrive, NoCloud, OpenStack and EC2 services: instance-id, host
// name, public keys, the admin user and password, network_data.json or
// network-config), which package seed writes as for cloud-init, and the
// rest from the user data, which this package renders: a #cloud-config of
// the modules cloudbase-init implements (write_files, timezone, ntp, groups,
// users, runcmd; the first and last also give the administrators' SSH keys
// to Windows OpenSSH's administrators_authorized_keys, sshkeys.go),
// combined with the user's own user data (#ps1, rem cmd,
// EC2's <powershell> tags, a MIME message…) as a MIME multipart message
// cloudbase-init's user-data plugin walks.
//
// What cloudbase-init cannot do is an error naming the spec field, as for
// the other agents: a Windows guest has no systemd units, mounts, package
// manager or sudo. Classify says how cloudbase-init reads a user-data
// document and which of its executors runs it, so `validate` can refuse
// what it would ignore. The tests hold every rendering to cloudbase-init's
// own code (oracle_test.go).
package cloudbaseinit
