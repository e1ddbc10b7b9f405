package cloudinittest

// sourced makes every urllib3 connection (requests, hence cloud-init's
// url_helper) come from the source address in the input ("src"), so that
// one test can play several VMs on 127.0.0.0/8 against a metadata server
// that tells them apart by address.
const sourced = `
import json, sys, tempfile
from unittest import mock
inp = json.load(sys.stdin)
import urllib3.util.connection as _uc
_orig = _uc.create_connection
def _cc(address, timeout=None, source_address=None, socket_options=None, **kw):
    import socket
    if timeout is None:
        timeout = socket._GLOBAL_DEFAULT_TIMEOUT
    return _orig(address, timeout, (inp["src"], 0), socket_options, **kw)
_uc.create_connection = _cc
def out(v):
    json.dump(v, sys.stdout, default=lambda o: o.decode() if isinstance(o, bytes) else str(o))
`

// Ec2Client fetches from a metadata server with cloud-init's own
// DataSourceEc2. Input: base (the server's URL), src, aws (whether the
// platform looks like AWS, which makes it use IMDSv2 tokens). Output: ok,
// cloud, metadata, instance_id, userdata, keys, identity, hostname, token.
const Ec2Client = sourced + `
from cloudinit import helpers
from cloudinit.sources import DataSourceEc2
tmp = tempfile.mkdtemp()
ds = DataSourceEc2.DataSourceEc2(
    sys_cfg={"datasource": {"Ec2": {"metadata_urls": [inp["base"]], "strict_id": False, "max_wait": 5, "timeout": 2}}},
    distro=mock.MagicMock(), paths=helpers.Paths({"run_dir": tmp}))
if inp["aws"]:
    plat = {"uuid": "ec2e1916-9099-7caf-fd21-012345abcdef", "serial": "ec2e1916-9099-7caf-fd21-012345abcdef",
            "uuid_source": "dmi", "asset_tag": "", "vendor": "Amazon EC2", "product_name": ""}
else:
    plat = {"uuid": "6b6f2f3c-0000-0000-0000-000000000000", "serial": "x", "uuid_source": "dmi",
            "asset_tag": "", "vendor": "QEMU", "product_name": "Standard PC"}
with mock.patch("cloudinit.sources.DataSourceEc2._collect_platform_data", return_value=plat):
    ok = ds.get_data()
out({"ok": ok, "cloud": ds.cloud_name, "metadata": ds.metadata, "instance_id": ds.get_instance_id(),
     "userdata": ds.userdata_raw, "keys": ds.get_public_ssh_keys(), "identity": ds.identity,
     "hostname": ds.get_hostname().hostname, "token": bool(getattr(ds, "_api_token", None))})
`

// OpenStackClient reads a metadata server with cloud-init's OpenStack
// MetadataReader (read_v2). Input: base, src. Output: metadata, userdata,
// networkdata, vendordata, version.
const OpenStackClient = sourced + `
from cloudinit.sources.helpers import openstack
with mock.patch("cloudinit.sources.helpers.ec2.get_instance_metadata", return_value={}):
    r = openstack.MetadataReader(inp["base"], timeout=2, retries=0).read_v2()
out({"metadata": r.get("metadata"), "userdata": r.get("userdata"), "networkdata": r.get("networkdata"),
     "vendordata": r.get("vendordata"), "version": r.get("version")})
`

// NoCloudNetClient reads a NoCloud-net seed URL as DataSourceNoCloudNet
// does (util.read_seeded). Input: base (the seed URL, ending in /), src.
// Output: md, ud, vd.
const NoCloudNetClient = sourced + `
from cloudinit import util
md, ud, vd = util.read_seeded(inp["base"], timeout=2, retries=0)
out({"md": md, "ud": ud, "vd": vd})
`
