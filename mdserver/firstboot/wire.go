package firstboot

import "encoding/json"

// What guests post (bootreport.EventsPath and bootreport.ReportPath, on
// the metadata listeners): one cloud-init reporting event, as its webhook
// handler posts it (ParseCloudInitEvent), or a GuestReport, the agent's
// final word on its first boot (ParseGuestReport).

// GuestReport is what a guest's completion unit posts to bootreport.ReportPath once
// first boot is over: for cloud-init, the content of its status.json and
// result.json and the tail of its output log, and the system's state after
// boot and its failed units (an older guest's report has no systemState:
// cloud-init's word alone); for Ignition, the system's state and its
// failed units. It is decoded strictly (ParseGuestReport: an unknown field
// is refused), and status and result are cloud-init's only (Report); its
// body is at most MaxReportBytes, JSON, with no Content-Type or
// application/json.
type GuestReport struct {
	Agent string `json:"agent"` // cloud-init or ignition
	// Status and Result are cloud-init's /run/cloud-init/status.json and
	// result.json, as the guest read them.
	Status json.RawMessage `json:"status,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// SystemState is `systemctl is-system-running` after boot (running,
	// degraded, …); FailedUnits the units that failed (at most 16), each
	// with the last 2 KiB of its journal: ignition/report.sh and
	// cloudinit/report.py send them alike.
	SystemState string       `json:"systemState,omitempty"`
	FailedUnits []UnitReport `json:"failedUnits,omitempty"`
	// Log is the tail of the agent's output (cloud-init-output.log).
	Log string `json:"log,omitempty"`
}

// UnitReport is one failed unit of a GuestReport.
type UnitReport struct {
	Unit string `json:"unit"`
	Log  string `json:"log,omitempty"`
}

// Report is a final report as the tracker takes it: the outcome and what
// failed.
type Report struct {
	Failed bool
	Errors []Failure
	// Message sums the report up in the event log ("degraded: 2 failed units").
	Message string
}
