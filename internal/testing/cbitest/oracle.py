#!/usr/bin/python3
# Runs cloudbase-init 1.1.9's own metadata services and user-data plugin on
# Linux against what vminit wrote or serves, and prints what they return as
# JSON. Only what touches Windows is stubbed:
#
#   - the OS utilities (osutils.factory.get_os_utils): FakeOSUtils below.
#     Its execute_process runs the Linux build of the program cloudbase-init
#     names (bsdtar, mlabel, mcopy: the ".exe" dropped) for real, and records,
#     without running, the scripts cloudbase-init's executors hand it
#     (cmd.exe, PowerShell, bash, python), with their content; the account,
#     group and NTP calls are recorded. Its set_timezone is WindowsUtils'
#     own (its source, taken from osutils/windows.py): the IANA name looked
#     up in tzlocal's tz_win, and the raise for a name not there; only the
#     Windows zone's setting (utils.windows.timezone) is recorded.
#   - the physical disks (utils.windows.disk.Disk): a file-backed disk
#     reading the image, as the Win32 API reads \\.\PHYSICALDRIVEn.
#   - the config drive manager's platform choice (osconfigdrive.factory picks
#     by sys.platform == "win32"): the Windows manager is used as is.
#   - where write_files writes: cloudbase-init's own _write_file, under a
#     temporary directory standing for the system drive's root.
#
# Package cbitest runs it (cbitest.go).
#
# Usage: oracle.py ORACLE_DIR JOBS, JOBS a JSON file of [[MODE, ARG]…]:
#   MODE configdrive-iso | configdrive-vfat | nocloud-iso | nocloud-vfat: ARG
#        the image; openstack | ec2: ARG the base URL.
# Each job runs the service, then cloudbase-init's plugins that take the
# metadata (SetHostName, NetworkConfig, CreateUser, SetUserPassword,
# SetUserSSHPublicKeys)
# and its UserDataPlugin.
# Output: a JSON list, a result for each job: {"instance_id", "host_name", "public_keys", "admin_username",
#          "admin_password", "user_data", "network", "can_post_password",
#          "post_password", "executed", "calls", "errors_logged", "files"}

import ast
import base64
import json
import logging
import os
import requests
import shutil
import subprocess
import sys
import tempfile
import types

ORACLE = sys.argv[1]
with open(sys.argv[2]) as f:
    JOBS = json.load(f)
MODE = ARG = None  # the job being run
sys.path.insert(0, ORACLE)

work = tempfile.mkdtemp(prefix="cbi-oracle-")
tempfile.tempdir = work  # the scripts, the copied drive, the ISO copy
calls = []
executed = []
existing = set()  # ("user"|"group", name) made by the job
logged = []  # the errors cloudbase-init logged (a failed cloud-config module: logged, and the next runs)


class _ErrorLog(logging.Handler):
    def emit(self, record):
        msg = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            e = record.exc_info[1]
            msg += ": %s: %s" % (type(e).__name__, e)
        logged.append(msg)


logging.getLogger("cloudbaseinit").addHandler(_ErrorLog(logging.ERROR))


class Disk(object):
    """utils.windows.disk.Disk over an image file."""

    fixed = True

    def __init__(self, path):
        self._path = path
        self.size = os.path.getsize(path)

    def __enter__(self):
        self._f = open(self._path, "rb")
        return self

    def __exit__(self, *exc):
        self._f.close()

    def seek(self, offset):
        self._f.seek(offset)
        return offset

    def read(self, size, skip=0):
        self._f.seek(self._f.tell() + skip)
        return self._f.read(size)

    def partitions(self):
        return []

    def __repr__(self):
        return "Disk(%r)" % self._path


disk_mod = types.ModuleType("cloudbaseinit.utils.windows.disk")
disk_mod.Disk = Disk
sys.modules["cloudbaseinit.utils.windows.disk"] = disk_mod
import cloudbaseinit.utils.windows  # noqa: E402
cloudbaseinit.utils.windows.disk = disk_mod


class FakeOSUtils(object):
    """What cloudbase-init asks of Windows, answered on Linux."""

    def execute_process(self, args, shell=True, decode_output=False):
        prog = os.path.basename(args[0])
        if prog.endswith(".exe") and prog[:-4] in ("bsdtar", "mlabel", "mcopy"):
            env = dict(os.environ, MTOOLS_SKIP_CHECK="1")
            p = subprocess.run([shutil.which(prog[:-4])] + list(args[1:]),
                               capture_output=True, env=env)
            return p.stdout, p.stderr, p.returncode
        if args[0] == CONF.bsdtar_path:
            p = subprocess.run(list(args), capture_output=True)
            return p.stdout, p.stderr, p.returncode
        # A script cloudbase-init runs: record it, run nothing.
        path = args[-1]
        if shell and path.endswith(".cmd"):
            executor = "Shell"
        else:
            executor = {"python": "Python", "bash": "Bash"}.get(args[0], "exe")
        executed.append({"executor": executor, "script": _read(path)})
        return b"", b"", 0

    def execute_powershell_script(self, path, sysnative=True):
        executed.append({"executor": "PowershellSysnative" if sysnative else "Powershell",
                         "script": _read(path)})
        return b"", b"", 0

    def get_physical_disks(self):
        return [ARG]

    def get_cdrom_drives(self):
        return []  # the image is a disk here (location "hdd")

    def get_volumes(self):
        return []

    def get_default_script_exec_header(self):
        return "rem cmd"  # constant.SCRIPT_HEADER_CMD, as WindowsUtils

    def get_maximum_password_length(self):
        return 20  # as WindowsUtils

    def generate_random_password(self, length):
        return "random-password"

    def __getattr__(self, name):
        # Accounts, groups, time zone, NTP, ACLs: recorded.
        def record(*args, **kwargs):
            calls.append([name] + [a for a in args if isinstance(a, (str, int, list))])
            if name in ("create_user", "create_group"):
                existing.add((name[7:], args[0]))
            if name in ("user_exists", "group_exists"):
                return (name[:-7], args[0]) in existing
            if name == "get_user_home":
                return os.path.join(work, "home", args[0])
            return None
        return record


class _Timezone(object):
    """utils.windows.timezone.Timezone: what it would set, recorded."""

    def __init__(self, name):
        self._name = name

    def set(self, osutils):
        calls.append(["Timezone.set", self._name])


def _windows_utils_method(name, **globals_):
    """WindowsUtils.NAME from cloudbase-init's osutils/windows.py, which
    imports Windows-only modules: compiled alone, with globals_ as its
    module's names."""
    path = os.path.join(ORACLE, "cloudbaseinit", "osutils", "windows.py")
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "WindowsUtils")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
    ns = dict(globals_)
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), ns)
    return ns[name]


from cloudbaseinit import exception as cbi_exception  # noqa: E402
from tzlocal import windows_tz  # noqa: E402
_set_timezone = _windows_utils_method("set_timezone", windows_tz=windows_tz, exception=cbi_exception,
                                      timezone=types.SimpleNamespace(Timezone=_Timezone))


def _recorded_set_timezone(self, name):
    calls.append(["set_timezone", name])
    return _set_timezone(self, name)


FakeOSUtils.set_timezone = _recorded_set_timezone


def _read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


from cloudbaseinit import conf as cloudbaseinit_conf  # noqa: E402
CONF = cloudbaseinit_conf.CONF
CONF([], project="cloudbase-init")
CONF.set_override("bsdtar_path", shutil.which("bsdtar"))
CONF.set_override("mtools_path", "/usr/bin")
CONF.set_override("retry_count", 1)
CONF.set_override("retry_count_interval", 0)
CONF.set_override("userdata_save_path", None)


def configure(mode, arg):
    """The options the job's service reads."""
    CONF.set_override("metadata_base_url", arg if mode == "openstack" else "http://127.0.0.1:9/", group="openstack")
    CONF.set_override("add_metadata_private_ip_route", False, group="openstack")
    CONF.set_override("metadata_base_url", arg if mode == "ec2" else "http://127.0.0.1:9/", group="ec2")
    CONF.set_override("add_metadata_private_ip_route", False, group="ec2")
    if mode.endswith("-iso") or mode.endswith("-vfat"):
        CONF.set_override("types", [mode.rsplit("-", 1)[1]], group="config_drive")
        CONF.set_override("locations", ["hdd"], group="config_drive")
        for deprecated in ("raw_hdd", "cdrom", "vfat"):
            CONF.set_override(deprecated, False, group="config_drive")


from cloudbaseinit.osutils import factory as osutils_factory  # noqa: E402
fake = FakeOSUtils()
osutils_factory.get_os_utils = lambda: fake

from cloudbaseinit.metadata.services.osconfigdrive import factory as cd_factory  # noqa: E402
from cloudbaseinit.metadata.services.osconfigdrive import windows as cd_windows  # noqa: E402
cd_factory.get_config_drive_manager = cd_windows.WindowsConfigDriveManager

from cloudbaseinit.plugins.common.userdataplugins.cloudconfigplugins import write_files  # noqa: E402
_write_file = write_files._write_file
write_files._write_file = lambda path, *a: _write_file(os.path.join(work, "root", os.path.relpath(path, "/")), *a)

from cloudbaseinit.metadata.services import base  # noqa: E402
from cloudbaseinit.metadata.services import configdrive, ec2service, httpservice, nocloudservice  # noqa: E402
from cloudbaseinit.plugins.common import networkconfig, sethostname, setuserpassword, sshpublickeys, userdata  # noqa: E402
from cloudbaseinit.plugins.windows import createuser  # noqa: E402


def plain(v):
    """Namedtuples (cloudbase-init's network model) as JSON."""
    if hasattr(v, "_asdict"):
        return {k: plain(x) for k, x in v._asdict().items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def ask(f, *args):
    try:
        return f(*args)
    except base.NotExistingMetadataException:
        return None
    except NotImplementedError:
        return None


def run(mode, arg):
    global MODE, ARG
    MODE, ARG = mode, arg
    del executed[:], calls[:], logged[:]
    existing.clear()
    root = os.path.join(work, "root")
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(os.path.join(work, "home"), ignore_errors=True)
    configure(mode, arg)
    service = {
        "configdrive": configdrive.ConfigDriveService,
        "nocloud": nocloudservice.NoCloudConfigDriveService,
        "openstack": httpservice.HttpService,
        "ec2": ec2service.EC2Service,
    }[mode.split("-")[0]]()
    out = {"loaded": service.load()}
    if out["loaded"]:
        ud = ask(service.get_decoded_user_data)
        out.update({
            "instance_id": ask(service.get_instance_id),
            "host_name": ask(service.get_host_name),
            "public_keys": sorted(ask(service.get_public_keys) or []),
            "admin_username": ask(service.get_admin_username),
            "admin_password": ask(service.get_admin_password),
            "user_data": base64.b64encode(ud).decode() if ud is not None else None,
            "network": plain(ask(service.get_network_details_v2)),
        })
        # cloudbase-init's plugins that take the metadata, in its order,
        # then its user-data plugin; shared_data carries the admin user
        # and password between them as in init.py.
        shared = {}
        for plugin in (sethostname.SetHostNamePlugin(), networkconfig.NetworkConfigPlugin(), createuser.CreateUserPlugin(),
                       setuserpassword.SetUserPasswordPlugin(), sshpublickeys.SetUserSSHPublicKeysPlugin(),
                       userdata.UserDataPlugin()):
            # init.py's exec_plugin: a plugin's failure is logged, and the
            # next plugin runs.
            try:
                plugin.execute(service, shared)
            except Exception as e:
                out.setdefault("plugin_errors", {})[type(plugin).__name__] = "%s: %s" % (type(e).__name__, e)
        if MODE == "openstack":
            out["can_post_password"] = service.can_post_password
            out["is_password_set"] = service.is_password_set
            # What SetUserPasswordPlugin posted, as the server gives it
            # back (nova's GET of the same path).
            out["password_posted"] = service._get_data(service._get_password_path()).decode()
            # cloudbase-init 1.1.9 means a 409 to be False ("already
            # set"), but catches urllib's HTTPError where requests raises
            # its own: it checks is_password_set before posting instead
            # (as SetUserPasswordPlugin did). The status is what the
            # server said.
            try:
                service.post_password(b"ZW5jcnlwdGVk")
                out["post_password_again"] = 200
            except requests.HTTPError as e:
                out["post_password_again"] = e.response.status_code
        out["executed"] = list(executed)
        out["calls"] = list(calls)
        out["errors_logged"] = list(logged)
        files = {}
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                with open(p, "rb") as f:
                    files["/" + os.path.relpath(p, root)] = base64.b64encode(f.read()).decode()
        out["files"] = files
        keys = {}
        home = os.path.join(work, "home")
        for user in sorted(os.listdir(home)) if os.path.isdir(home) else []:
            p = os.path.join(home, user, ".ssh", "authorized_keys")
            if os.path.exists(p):
                keys[user] = _read(p)
        out["authorized_keys"] = keys
        service.cleanup()
    return out


results = [run(m, a) for m, a in JOBS]
shutil.rmtree(work, ignore_errors=True)
json.dump(results, sys.stdout, indent=1, sort_keys=True)
