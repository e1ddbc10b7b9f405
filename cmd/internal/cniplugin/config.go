package cniplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/vminit/vminit/mdserver/intercept"
)

// Config is the plugin's entry in a conflist, as the runtime passes it:
//
//	{"type": "vminit-cni", "agent": "172.31.0.10:8775", "agent6": "[fd00:31::10]:8775"}
//
// agent is the node agent's IPv4 address and port (the node's address:
// the DaemonSet writes each node's conflist), where requests for
// 169.254.169.254:80 go; agent6, on a dual-stack node only, its IPv6
// address and port, where requests for [fd00:ec2::254]:80 go. The keys the CNI specification
// defines for every plugin are accepted and, but for cniVersion and
// prevResult, ignored; any other key is an error naming it.
type Config struct {
	CNIVersion string
	Table      *intercept.Table
	// Table6 is agent6's table (ip6 vminit), nil without agent6.
	Table6 *intercept.Table
	// PrevResult is the previous plugin's result as the runtime passed
	// it (nil when there is none), which ADD prints back unchanged.
	PrevResult json.RawMessage
}

// podTable is the pod table for the agent address in the field named
// field, which must be of the family v6 says.
func podTable(raw json.RawMessage, field string, v6 bool) (*intercept.Table, error) {
	var s string
	if err := strict(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: want a string ADDRESS:PORT: %v", field, err)
	}
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %q is not ADDRESS:PORT", field, s)
	case v6 && ap.Addr().Is4():
		return nil, fmt.Errorf("%s: %s is IPv4: agent6 is the node agent's IPv6 address, [ADDRESS]:PORT", field, s)
	case !v6 && !ap.Addr().Is4():
		return nil, fmt.Errorf("%s: %s is not IPv4: give the node agent's IPv6 address as agent6", field, s)
	}
	t, err := intercept.Pod(ap)
	if err != nil {
		// intercept names the field "agent".
		return nil, fmt.Errorf("%s%s", field, strings.TrimPrefix(err.Error(), "agent"))
	}
	return t, nil
}

// tables are the configuration's tables: IPv4's, and IPv6's if any.
func (c *Config) tables() []*intercept.Table {
	if c.Table6 == nil {
		return []*intercept.Table{c.Table}
	}
	return []*intercept.Table{c.Table, c.Table6}
}

// protocolKeys are the keys CNI 1.0 and 1.1 define for any plugin's
// configuration (besides "cni.dev/…", reserved): the runtime's and the
// well-known optional ones, which this plugin has no use for.
var protocolKeys = []string{"args", "capabilities", "cniVersion", "dns", "ipMasq", "ipam", "name", "prevResult", "runtimeConfig", "type"}

// ParseConfig decodes and checks a configuration, listing every problem,
// each naming its field.
func ParseConfig(data []byte) (*Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("configuration: %v", err)
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if k != "agent" && k != "agent6" && !slices.Contains(protocolKeys, k) && !strings.HasPrefix(k, "cni.dev/") {
			errs = append(errs, fmt.Errorf("%q: unknown field (vminit-cni takes agent and agent6)", k))
		}
	}
	c := &Config{}
	if err := strict(raw["cniVersion"], &c.CNIVersion); err != nil || c.CNIVersion == "" {
		errs = append(errs, fmt.Errorf("cniVersion: want a version string such as \"1.0.0\""))
	}
	var err error
	if raw["agent"] == nil {
		errs = append(errs, errors.New("agent: missing: the node agent's ADDRESS:PORT"))
	} else if c.Table, err = podTable(raw["agent"], "agent", false); err != nil {
		errs = append(errs, err)
	}
	if raw["agent6"] != nil {
		if c.Table6, err = podTable(raw["agent6"], "agent6", true); err != nil {
			errs = append(errs, err)
		}
	}
	if p := raw["prevResult"]; p != nil && !bytes.Equal(p, []byte("null")) && c.CNIVersion != "" {
		if _, err := version.NewResult(c.CNIVersion, p); err != nil {
			errs = append(errs, fmt.Errorf("prevResult: not a CNI %s result: %v", c.CNIVersion, err))
		}
		c.PrevResult = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// strict decodes one value, refusing what does not fit its type; an
// absent value is left alone.
func strict(data json.RawMessage, v any) error {
	if data == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// result is what ADD prints: the previous plugin's result as it came, or,
// first in a chain, an empty result of the configuration's version.
func (c *Config) result() ([]byte, error) {
	if c.PrevResult != nil {
		return c.PrevResult, nil
	}
	r, err := (&current.Result{CNIVersion: current.ImplementedSpecVersion}).GetAsVersion(c.CNIVersion)
	if err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

// VirtLauncherPrefix starts the name of every pod KubeVirt makes for a
// VMI (virt-launcher-NAME-XXXXX).
const VirtLauncherPrefix = "virt-launcher-"

// IsVirtLauncher reports whether CNI_ARGS (KEY=VALUE pairs joined by
// ';') name a virt-launcher pod: K8S_POD_NAME, which kubelet's runtimes
// pass, starts with VirtLauncherPrefix.
func IsVirtLauncher(cniArgs string) (bool, error) {
	for _, kv := range strings.Split(cniArgs, ";") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return false, fmt.Errorf("CNI_ARGS: %q is not KEY=VALUE", kv)
		}
		if k == "K8S_POD_NAME" {
			return strings.HasPrefix(v, VirtLauncherPrefix), nil
		}
	}
	return false, nil
}

// parse is ParseConfig for the protocol: its errors are CNI errors.
func parse(stdin []byte) (*Config, error) {
	c, err := ParseConfig(stdin)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "vminit-cni: "+err.Error(), "")
	}
	return c, nil
}
