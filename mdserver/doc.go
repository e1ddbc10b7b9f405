// Package mdserver is the guest side of vminit's metadata server: one
// http.Handler that serves every instance's first-boot data in the
// dialects guests already speak (EC2 IMDS v1 and v2, OpenStack,
// NoCloud-net, Ignition), rendered from the same spec the seeds are built
// from.
//
// A request is answered only with the data of the instance that owns its
// source address (or, behind a trusted proxy, the instance named by a
// signed header), so a VM can never read another VM's data. The handler
// reads instances through a registry.Source, one method: Snapshot. The
// stores that hold them (dirstore, etcdstore, kubestore) and the admin API
// that changes them (package admin) are packages of their own.
//
// Each dialect is one file of the same shape (ec2.go, openstack.go,
// nocloud.go, ignition.go) that declares itself once, in a register call
// in its init (dialect.go): its name, the paths it owns, the routes it adds
// to the handler's ServeMux, its token rule (EC2's IMDSv2 check and token
// signer are ec2.go's) and what a preview crawls; beside it, the pieces of
// a record it renders (newPiece), once per record revision, on first use.
// Identification, rate limits, spec.metadataServer's dialect choice,
// metrics and the audit log are the handler's, around every dialect.
//
// Guests also write, of one thing only: their own first boot (events.go,
// registered beside the dialects but served to every instance, under a
// rate limit of its own). The handler's first-boot tracker
// (Handler.Boots, package firstboot) holds what they posted and every
// fetch the handler answered; the admin API and the metrics read it. The
// user data and Ignition configs served tell the guest to report its
// first boot back (report.go): to Options.ReportURL, else to the scheme
// and host the guest reached the server at, unless Options.NoBootReports.
//
// To add a dialect: write its file the same way (its register call also
// gives the title and paths serve's help shows, and the agents vminit run
// can point at it), and add its name to spec.Dialects, so that
// spec.metadataServer.dialects may list it (TestDialectsMatchSpec fails
// until both agree; TestDialectsMarkers, until the CRD's markers beside
// it do). Nothing else changes: the programs read the registry
// (Dialects) for the admin API's previews, vminit run's --dialect and the
// help texts. dialect_test.go's toy dialect is the proof, and
// TestToyDialectInEveryProgram finds it in each of them.
package mdserver
