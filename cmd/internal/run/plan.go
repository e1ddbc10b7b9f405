package run

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/internal/lib/lazyre"
	"github.com/vminit/vminit/internal/lib/qemu"
	"github.com/vminit/vminit/mdserver"
	"github.com/vminit/vminit/media"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

const (
	agentCloudInit = spec.AgentCloudInit
	agentIgnition  = spec.AgentIgnition
)

// The deliveries (Options.Datasource) each agent reads.
const (
	DatasourceNoCloud     = string(seed.NoCloud)
	DatasourceConfigDrive = string(seed.ConfigDrive)
	DatasourceFwCfg       = "fwcfg"
)

// Datasources lists Options.Datasource's values per agent, the first
// being the default (cloud-init: the spec's datasource when it names one).
var Datasources = map[string][]string{
	agentCloudInit: {DatasourceNoCloud, DatasourceConfigDrive},
	agentIgnition:  {DatasourceFwCfg, DatasourceConfigDrive},
}

// Media lists Options.Media's values, the first being the default: the
// seed drive is a CD-ROM (ISO9660) or a virtio disk (VFAT).
var Media = []string{"iso", "vfat"}

// Dialects are the metadata API dialects Serve speaks to each agent
// (Options.Dialect), as the agent calls them: the metadata server's
// dialects that say how the agent is pointed at them
// (mdserver.DialectInfo.Readers), in their order; the first is the
// default unless the spec's metadataServer.dialects lists another.
// readers are the same by agent, then by the agent's name. Both are made
// on first use: vminit's start-up allocates nothing for commands that do
// not run a VM (TestInitIsLazy).
func Dialects() map[string][]string { d, _ := agentDialectsOnce(); return d }

func readers() map[string]map[string]reader { _, r := agentDialectsOnce(); return r }

var agentDialectsOnce = sync.OnceValues(agentDialects)

// A reader is an agent's way to a dialect of the metadata server.
type reader struct {
	dialect string // the metadata server's name for it
	mdserver.DialectReader
}

func agentDialects() (map[string][]string, map[string]map[string]reader) {
	names, readers := map[string][]string{}, map[string]map[string]reader{}
	for _, d := range mdserver.Dialects() {
		for _, r := range d.Readers {
			as := cmp.Or(r.As, d.Name)
			if readers[r.Agent] == nil {
				readers[r.Agent] = map[string]reader{}
			}
			readers[r.Agent][as] = reader{d.Name, r}
			names[r.Agent] = append(names[r.Agent], as)
		}
	}
	return names, readers
}

// Defaults of Options.
const (
	DefaultMemory  = "2G"
	DefaultCPUs    = 2
	DefaultTimeout = 10 * time.Minute
	// DefaultReportWait is Options.ReportWait's default: the Ignition
	// test guest's report comes about 100 s after Ignition completes
	// under TCG (its completion unit posts once the system is up).
	DefaultReportWait = 3 * time.Minute
)

// Addresses the guest sees on QEMU's user-mode network.
const (
	// metadataNet is the user network of a guest reaching a metadata
	// server at 169.254.169.254: QEMU forwards only addresses inside the
	// user network (guestfwd), so the network is the link-local /24 that
	// holds it (host 169.254.169.2, DHCP from .15).
	metadataNet  = "169.254.169.0/24"
	metadataAddr = "169.254.169.254"
)

// config is Options checked and completed.
type config struct {
	Options
	agent      string
	datasource string
	media      media.Format
	dialect    string
	macs       []string // per NIC; "" lets QEMU choose
	accel      []string
}

var reMemory = lazyre.New(`^[1-9][0-9]*[KMGT]?$`)

// configure checks o and fills in its defaults; every problem is listed.
func configure(o Options) (*config, error) {
	c := &config{Options: o}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if o.Instance == nil {
		return nil, fmt.Errorf("run: no instance spec")
	}
	c.agent = o.Instance.Spec.Agent
	if c.agent == "" {
		c.agent = agentCloudInit
	}
	c.configureMachine(bad)
	c.configureDisks(bad)
	c.configureDelivery(bad)
	if len(errs) > 0 {
		return nil, fmt.Errorf("run: %s", strings.Join(errs, "; "))
	}
	c.macs = nicMACs(o.Instance.Spec.Network, o.NICs)
	return c, nil
}

// configureMachine checks and completes the virtual machine: what it
// boots, its size, its NICs and SSH port, its timeout and accelerator.
func (c *config) configureMachine(bad func(format string, a ...any)) {
	if c.Image == "" && c.Kernel == "" {
		bad("image: a disk image is required (or a kernel to boot)")
	}
	if c.ImageFormat != "" && !slices.Contains(qemu.Formats, c.ImageFormat) {
		bad("image format %q: want %s", c.ImageFormat, strings.Join(qemu.Formats, " or "))
	}
	if (c.Initrd != "" || c.Append != "") && c.Kernel == "" {
		bad("initrd/append: they need a kernel (--kernel)")
	}
	if c.Memory == "" {
		c.Memory = DefaultMemory
	} else if !reMemory.MatchString(c.Memory) {
		bad("memory %q: want a size such as 2G or 1024M", c.Memory)
	}
	if c.CPUs == 0 {
		c.CPUs = DefaultCPUs
	} else if c.CPUs < 0 || c.CPUs > 64 {
		bad("cpus %d: want 1 to 64", c.CPUs)
	}
	if c.SSHPort < 0 || c.SSHPort > 65535 {
		bad("ssh port %d: want 1 to 65535", c.SSHPort)
	}
	if c.NICs < 0 || c.NICs > 8 {
		bad("nics %d: want 0 to 8 extra NICs", c.NICs)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	} else if c.Timeout < 0 {
		bad("timeout %v: want a positive duration", c.Timeout)
	}
	if c.StallAfter < 0 {
		bad("stall after %v: want a positive duration", c.StallAfter)
	}
	if c.ReportWait == 0 {
		c.ReportWait = DefaultReportWait
	} else if c.ReportWait < 0 {
		bad("report wait %v: want a positive duration", c.ReportWait)
	}
	if !slices.Contains(qemu.Accelerators, orDefault(c.Accel, "auto")) {
		bad("accel %q: want %s", c.Accel, strings.Join(qemu.Accelerators, ", "))
	}
}

// configureDelivery checks and completes how the first-boot data reaches
// the guest: the datasource and its medium, or with Serve the metadata
// server's dialect.
func (c *config) configureDelivery(bad func(format string, a ...any)) {
	s := &c.Instance.Spec
	dss, ok := Datasources[c.agent]
	if !ok {
		// cloudbase-init: neither its console nor a report says when its
		// first boot ends.
		bad("spec.agent %q: vminit run boots %s and %s guests, whose console and report say how their first boot ends", c.agent, agentCloudInit, agentIgnition)
		return
	}
	switch {
	case c.Datasource != "":
		c.datasource = c.Datasource
	case c.agent == agentCloudInit && s.Datasource != "":
		c.datasource = s.Datasource
	default:
		c.datasource = dss[0]
	}
	if !slices.Contains(dss, c.datasource) {
		bad("datasource %q: %s reads %s", c.datasource, c.agent, strings.Join(dss, " or "))
	}
	switch orDefault(c.Media, Media[0]) {
	case "iso", string(media.ISO9660):
		c.media = media.ISO9660
	case string(media.VFAT):
		c.media = media.VFAT
	default:
		bad("media %q: want %s", c.Media, strings.Join(Media, " or "))
	}
	if !c.Serve {
		if c.Dialect != "" {
			bad("dialect %q: it needs serve", c.Dialect)
		}
		return
	}
	c.dialect = c.Dialect
	if c.dialect == "" {
		c.dialect = defaultDialect(c.agent, s.MetadataServer)
	}
	if !slices.Contains(Dialects()[c.agent], c.dialect) {
		bad("dialect %q: %s reads %s from a metadata server", c.dialect, c.agent, strings.Join(Dialects()[c.agent], " or "))
	} else if ms := s.MetadataServer; !ms.ServesDialect(readers()[c.agent][c.dialect].dialect) {
		bad("dialect %q: spec.metadataServer does not serve this instance through it (dialects %v, imdsv2 %q)", c.dialect, ms.Dialects, ms.IMDSv2)
	}
	if c.Datasource != "" {
		bad("datasource %q: with serve the guest reads the metadata server (choose its API with dialect)", c.Datasource)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// defaultDialect is the spec's first metadata-server dialect the agent
// reads, else EC2 (Ignition: aws).
func defaultDialect(agent string, ms *spec.MetadataServer) string {
	if ms != nil {
		for _, d := range ms.Dialects {
			for _, a := range Dialects()[agent] {
				if readers()[agent][a].dialect == d {
					return a
				}
			}
		}
	}
	return Dialects()[agent][0]
}

// nicMACs returns the MAC of each NIC: the spec's ethernets that name one
// (match.macAddress, else macAddress), in the order of their IDs, give
// the first NICs theirs; there are 1+extra NICs, or as many as the spec
// names MACs for.
func nicMACs(n *spec.Network, extra int) []string {
	var macs []string
	if n != nil {
		ids := make([]string, 0, len(n.Ethernets))
		for id := range n.Ethernets {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			e := n.Ethernets[id]
			mac := e.MACAddress
			if e.Match != nil && e.Match.MACAddress != "" {
				mac = e.Match.MACAddress
			}
			if mac != "" {
				macs = append(macs, strings.ToLower(mac))
			}
		}
	}
	for len(macs) < 1+extra {
		macs = append(macs, "")
	}
	return macs
}

// files are the paths and ports a boot uses, decided by Start.
type files struct {
	qemu       string
	disk       string // the overlay ("" without an image)
	diskFormat string
	extra      []extraDisk // Options.Disks
	seed       string      // a cloud-init seed or Ignition config drive
	fwCfg      string      // an Ignition config for fw_cfg
	qmp        string      // the QMP socket
	relay      string      // the metadata relay's Unix socket (serve)
}

// args returns QEMU's command line (without the program).
func (c *config) args(f files) []string {
	a := []string{
		"-nodefaults", "-no-user-config", "-display", "none",
		"-machine", "pc", "-m", c.Memory, "-smp", strconv.Itoa(c.CPUs),
	}
	a = append(a, c.accel...)
	a = append(a,
		"-rtc", "base=utc",
		"-device", "virtio-rng-pci",
		// The serial console is QEMU's standard input and output (pipes).
		"-chardev", "stdio,id=console,signal=off", "-serial", "chardev:console",
		"-qmp", "unix:"+qemu.Escape(f.qmp)+",server=on,wait=off",
	)
	if f.disk != "" {
		a = append(a, "-drive", "if=virtio,file="+qemu.Escape(f.disk)+",format="+f.diskFormat)
	}
	a = append(a, diskArgs(f.extra)...)
	if f.seed != "" {
		if c.media == media.VFAT {
			a = append(a, "-drive", "if=virtio,file="+qemu.Escape(f.seed)+",format=raw,readonly=on")
		} else {
			a = append(a, "-drive", "file="+qemu.Escape(f.seed)+",format=raw,media=cdrom,readonly=on")
		}
	}
	if f.fwCfg != "" {
		a = append(a, delivery.QEMUArgs(f.fwCfg)...)
	}
	if c.Serve {
		a = append(a, "-chardev", "socket,id=metadata,reconnect=1,path="+qemu.Escape(f.relay))
	}
	for i, mac := range c.macs {
		netdev := fmt.Sprintf("user,id=net%d", i)
		if !c.Outbound {
			netdev += ",restrict=on"
		}
		if i == 0 {
			if c.Serve {
				netdev += ",net=" + metadataNet
				netdev += ",guestfwd=tcp:" + metadataAddr + ":80-chardev:metadata"
			}
			if c.SSHPort != 0 {
				netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:22", c.SSHPort)
			}
		}
		dev := fmt.Sprintf("virtio-net-pci,netdev=net%d", i)
		if mac != "" {
			dev += ",mac=" + mac
		}
		a = append(a, "-netdev", netdev, "-device", dev)
	}
	if c.Serve {
		a = append(a, c.smbios()...)
	}
	if c.Kernel != "" {
		a = append(a, "-kernel", c.Kernel)
		if c.Initrd != "" {
			a = append(a, "-initrd", c.Initrd)
		}
		if c.Append != "" {
			a = append(a, "-append", c.Append)
		}
	}
	return a
}

// smbios returns the SMBIOS strings the agent reads to pick the dialect
// with no kernel argument, as the dialect's file in package mdserver
// says (cloud-init's ds-identify; Ignition's platform comes from the
// kernel command line).
func (c *config) smbios() []string {
	r := readers()[c.agent][c.dialect]
	if r.SMBIOS == nil {
		return nil
	}
	return []string{"-smbios", r.SMBIOS(metadataAddr, c.Instance.Metadata.Name)}
}
