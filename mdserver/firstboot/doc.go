// Package firstboot tracks each instance's first boot as the metadata
// server sees it: the fetches it answered, the events the guest's agent
// posted (cloud-init's reporting webhook, per stage and per module), and
// the agent's final report (the system's state and failed units, and for
// cloud-init its status and result).
//
// A Tracker holds, per instance incarnation (name and UID), a Status: its
// State (pending → fetched → running → done | failed, and stalled when no
// event came for Options.StallAfter, unless its agent sends no report at
// all: Options.Reports, Status.NoReport), the stage and module it is in, the
// stages' times, the failures with their messages, and the last events.
// Everything a guest can make it hold is bounded: events are a ring,
// names, messages, failures and stages are capped, and all its text
// together is MaxText (limits.go). A fleet's readers get rows (Brief: the
// first error only, clipped), a page at a time (Summary.Page), and a
// watcher the changes since its last read (Summary.Changes), paced by
// what reads and sends cost (WatchPause).
//
// The tracker knows nothing of HTTP or stores. The metadata handler
// (package mdserver) identifies the guest, reads what it posted with
// ParseCloudInitEvent (cloudinit.go) and ParseGuestReport and
// GuestReport.Report (guest.go), and calls Fetch, Record and Report; the admin API, the web page and the CLI read Status and watch
// Changes; a store that shares statuses between replicas (etcdstore,
// kubestore) implements Sink, which Persist feeds (paced per instance),
// and hands what other replicas wrote to Merge: each replica holds, and
// the store keeps, the union of what the replicas heard (merge.go).
package firstboot
