package admin

import "github.com/vminit/vminit/spec"

// The JSON bodies of the admin API, shared by NewHandler and Client.
type (
	// InstanceSummary is one entry of GET /v1/instances.
	InstanceSummary struct {
		Name      string   `json:"name"`
		Addresses []string `json:"addresses"`
		Revision  string   `json:"revision"`
		// UID is the instance's incarnation (registry.Record.UID), which
		// a trusted proxy's signed X-Vminit-Instance header names; always
		// present, "" for the empty UID (and in PUT's answer), so that
		// every row of a listing has the same keys.
		UID string `json:"uid"`
	}
	// InstanceList is the body of GET /v1/instances.
	InstanceList struct {
		Instances []InstanceSummary `json:"instances"`
	}
	// PreviewFile is one file of a preview. Content is set for UTF-8 text,
	// ContentBase64 otherwise.
	PreviewFile struct {
		Path          string `json:"path"`
		Content       string `json:"content,omitempty"`
		ContentBase64 string `json:"contentBase64,omitempty"`
	}
	// Preview is the body of GET /v1/instances/{name}/preview.
	Preview struct {
		Name     string        `json:"name"`
		Dialect  string        `json:"dialect"`
		Revision string        `json:"revision"`
		Files    []PreviewFile `json:"files"`
		Warnings []string      `json:"warnings,omitempty"`
	}
	// ErrorBody is every error response: field errors for invalid specs
	// (422), one message otherwise.
	ErrorBody struct {
		Errors []*spec.FieldError `json:"errors"`
	}
)
