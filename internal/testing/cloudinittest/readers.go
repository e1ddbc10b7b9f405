package cloudinittest

import "testing"

// Seed is what cloud-init's datasource code reads from a seed directory:
// NoCloudReader's or ConfigDriveReader's output.
type Seed struct {
	InstanceID    string         `json:"instance_id"`
	Hostname      string         `json:"hostname"`
	FQDN          string         `json:"fqdn"` // NoCloud only
	Keys          []string       `json:"keys"`
	UserData      []byte         `json:"user_data"`
	VendorData    any            `json:"vendor_data"`
	NetworkConfig map[string]any `json:"network_config"` // NoCloud's network-config
	Metadata      map[string]any `json:"metadata"`
	// Config is the final cloud-config: every cloud-config part of the
	// user-data merged as first boot merges them.
	Config    map[string]any `json:"config"`
	PartTypes []string       `json:"part_types"`
	// Network is ConfigDrive's network_data.json as cloud-init's network
	// state holds it, by interface name.
	Network map[string]Interface `json:"network"`
}

// Interface is one interface of Seed.Network.
type Interface struct {
	Type      string   `json:"type"`
	MAC       string   `json:"mac"`
	VLANID    int      `json:"vlan_id"`
	Link      string   `json:"link"`
	Master    string   `json:"master"`
	Addresses []string `json:"addresses"`
}

// ReadSeed reads the seed directory dir with reader (NoCloudReader or
// ConfigDriveReader); knownMACs maps MAC addresses to the interface names
// the ConfigDrive reader's network conversion finds them under.
func ReadSeed(t testing.TB, reader, dir string, knownMACs map[string]string) *Seed {
	t.Helper()
	var s Seed
	Run(t, reader, map[string]any{"dir": dir, "known_macs": knownMACs}, &s)
	return &s
}

// FinalConfig is Python defining final_config(blob), which returns the
// final cloud-config of a user data (its cloud-config parts merged as
// first boot merges them) and its part types, and b64: for scripts that
// read many user data in one run.
const FinalConfig = finalConfig

// finalConfig is shared by both readers: it runs the user-data through
// cloud-init's UserDataProcessor and merges its cloud-config parts with the
// cloud-config handler, as first boot does, and lists the part types.
const finalConfig = `
import base64
from cloudinit import user_data as ud, util
from cloudinit.handlers.cloud_config import CloudConfigPartHandler

def final_config(blob):
    p = ud.UserDataProcessor.__new__(ud.UserDataProcessor)
    p.paths, p.ssl_details = None, None
    h = CloudConfigPartHandler.__new__(CloudConfigPartHandler)
    h.cloud_buf = {}
    types = []
    for part in p.process(blob).walk():
        if ud.is_skippable(part):
            continue
        types.append(part.get_content_type())
        if part.get_content_type() == "text/cloud-config":
            h._merge_part(util.fully_decoded_payload(part), part)
    return h.cloud_buf, types

def b64(b):
    if isinstance(b, str):
        b = b.encode()
    return base64.b64encode(b or b"").decode()
`

// NoCloudReader reads a seed directory as DataSourceNoCloud reads a cidata
// disk: pathprefix2dict with its required and optional files, then its
// _merge_new_seed. Its input is {"dir": seed directory}; its output has
// instance_id, hostname, fqdn, keys, user_data (base64), vendor_data,
// network_config, metadata, config (the merged cloud-config) and
// part_types.
const NoCloudReader = finalConfig + `
import json, sys
from cloudinit.sources import DataSourceNoCloud as nc
inp = json.load(sys.stdin)
seeded = util.pathprefix2dict(inp["dir"], required=["user-data", "meta-data"], optional=["vendor-data", "network-config"])
data = nc._merge_new_seed({"meta-data": {}, "user-data": "", "vendor-data": "", "network-config": None}, seeded)
ds = nc.DataSourceNoCloud.__new__(nc.DataSourceNoCloud)
ds.metadata = data["meta-data"]
cfg, types = final_config(data["user-data"])
json.dump({
    "instance_id": ds.get_instance_id(),
    "hostname": ds.get_hostname().hostname,
    "fqdn": ds.get_hostname(fqdn=True).hostname,
    "keys": ds.get_public_ssh_keys(),
    "user_data": b64(data["user-data"]),
    "vendor_data": b64(data["vendor-data"]),
    "network_config": data["network-config"],
    "metadata": data["meta-data"],
    "config": cfg,
    "part_types": types,
}, sys.stdout, default=str)
`

// ConfigDriveReader reads a seed directory with ConfigDriveReader.read_v2, as
// DataSourceConfigDrive reads a config-2 disk, and converts its
// network_data.json to a network state.
const ConfigDriveReader = finalConfig + `
import json, sys
from unittest import mock
import cloudinit.net
from cloudinit import sources
from cloudinit.net import network_state as ns
from cloudinit.sources.helpers import openstack
inp = json.load(sys.stdin)
r = openstack.ConfigDriveReader(inp["dir"]).read_v2()
md = r["metadata"]
cfg, types = final_config(r["userdata"])
net = None
if r.get("networkdata") is not None:
    with mock.patch.object(cloudinit.net, "get_ib_hwaddrs_by_interface", return_value={}):
        conv = openstack.convert_net_json(r["networkdata"], known_macs=inp["known_macs"])
    state = ns.parse_net_config_data(conv)
    net = {i["name"]: {"type": i["type"], "mac": i.get("mac_address"), "vlan_id": i.get("vlan_id"),
                       "link": i.get("vlan-raw-device"), "master": i.get("bond-master"),
                       "addresses": sorted("%s/%s" % (s["address"], s["prefix"]) for s in i.get("subnets", []) if s.get("address"))}
           for i in state.iter_interfaces()}
json.dump({
    "instance_id": md["instance-id"],
    "hostname": md.get("local-hostname"),
    "keys": sources.normalize_pubkey_data(md.get("public_keys")),
    "user_data": b64(r["userdata"]),
    "vendor_data": sources.convert_vendordata(r.get("vendordata")),
    "metadata": md,
    "network": net,
    "config": cfg,
    "part_types": types,
}, sys.stdout, default=str)
`

// FirstBootReader is Python that takes a final cloud-config ({"config": …},
// Seed.Config) and returns what cloud-init's write_files and runcmd modules
// make of it: each file's path, content (base64, decoded by write_files'
// own extract_contents), permissions (its decode_perms), owner, append and
// defer; and the runcmd script (util.shellify, as cc_runcmd writes it).
const FirstBootReader = `
import base64, json, sys
from cloudinit import util
from cloudinit.config import cc_write_files as wf
cfg = json.load(sys.stdin)["config"]
files = []
for f in cfg.get("write_files") or []:
    data = wf.extract_contents(f.get("content", ""), wf.canonicalize_extraction(f.get("encoding")))
    if isinstance(data, str):
        data = data.encode()
    files.append({"path": f["path"], "content": base64.b64encode(data).decode(),
                  "perms": wf.decode_perms(f.get("permissions"), 0o644), "owner": f.get("owner", "root:root"),
                  "append": bool(f.get("append", False)), "defer": bool(f.get("defer", False))})
json.dump({"files": files, "runcmd": util.shellify(cfg["runcmd"]) if cfg.get("runcmd") else ""}, sys.stdout)
`

// FirstBoot is FirstBootReader's output.
type FirstBoot struct {
	Files []struct {
		Path    string `json:"path"`
		Content []byte `json:"content"`
		Perms   int    `json:"perms"`
		Owner   string `json:"owner"`
		Append  bool   `json:"append"`
		Defer   bool   `json:"defer"`
	} `json:"files"`
	Runcmd string `json:"runcmd"`
}

// ReadFirstBoot runs FirstBootReader on a final cloud-config.
func ReadFirstBoot(t testing.TB, config map[string]any) *FirstBoot {
	t.Helper()
	var fb FirstBoot
	Run(t, FirstBootReader, map[string]any{"config": config}, &fb)
	return &fb
}
