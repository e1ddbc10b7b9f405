package mdserver

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/mdserver/registry"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// What the dialects share: the user data every dialect serves, and the
// metadata files the OpenStack and NoCloud dialects take from package seed.

// isIgnition reports whether the instance's user data is Ignition: its
// spec.agent, which spec.Default fills in.
func isIgnition(inst *spec.Instance) bool {
	return inst.Spec.Agent == spec.AgentIgnition
}

// userData returns the user data every dialect serves: cloud-init's, or
// for an Ignition instance the Ignition config, replaced by a pointer
// config to this server's /ignition/config when it exceeds the transport's
// budget (as it would on the real cloud). Either reports the first boot
// to this server (report.go).
func (h *Handler) userData(r *http.Request, rec *registry.Record, transport string) ([]byte, string, error) {
	if !isIgnition(rec.Instance()) {
		ud, err := h.cloudInitUserData(r, rec)
		return ud, textPlain, err
	}
	cfg, err := h.ignitionConfigFor(r, rec)
	if err != nil {
		return nil, "", err
	}
	if transport == "" {
		return cfg, ignitionType, nil
	}
	t, err := delivery.LookupTransport(transport)
	if err != nil {
		return nil, "", err
	}
	out, _, err := delivery.Fit(cfg, t, configURL(r), nil)
	return out, ignitionType, err
}

// cloudUserData is the record's cloud-init user data, without the
// first-boot report (cloudInitUserData adds it).
var cloudUserData = newPiece(func(_ *Handler, rec *registry.Record) ([]byte, error) {
	return renderCloudUserData(rec)
}, bytesLen)

func renderCloudUserData(rec *registry.Record) ([]byte, error) {
	ud, err := seed.UserData(rec.Instance())
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", rec.Name, err)
	}
	return ud, nil
}

// metadataFiles declares the piece of the files seed.Metadata gives ds,
// named by their path without dir.
func metadataFiles(ds seed.Datasource, dir string) *piece[map[string][]byte] {
	return newPiece(func(_ *Handler, rec *registry.Record) (map[string][]byte, error) {
		files, err := seed.Metadata(rec.Instance(), ds, seed.Options{})
		if err != nil {
			return nil, fmt.Errorf("rendering %s for %s: %w", rec.Name, ds, err)
		}
		m := make(map[string][]byte, len(files))
		for _, f := range files {
			m[strings.TrimPrefix(f.Path, dir)] = f.Data
		}
		return m, nil
	}, func(m map[string][]byte) int64 { return treeBytes(m) })
}
