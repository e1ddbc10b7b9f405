package platform_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"sigs.k8s.io/yaml"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/delivery"
	"github.com/vminit/vminit/internal/testing/cloudinittest"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/render"
	"github.com/vminit/vminit/seed"
)

// TestCorpusKubeVirt runs KubeVirt's corpus (testdata/corpus/kubevirt): its own published
// objects, kept as published; see corpus_test.go for expect.txt.
func TestCorpusKubeVirt(t *testing.T) { runCorpus(t, corpusPlatform{Dir: "kubevirt"}) }

// TestCorpusMatchesKubeVirt compares, field by field, what vminit delivers
// for every KubeVirt corpus object that builds with what KubeVirt itself
// would: virt-launcher's pkg/cloud-init (ReadCloudInitVolumeDataSource,
// GenerateLocalData, kubevirt/kubevirt at HEAD; v0.12.0's GenerateLocalData
// for kubevirt.io/v1alpha2) and the controllers feeding it (the VM
// controller's CalculateLegacyUUID, dns.SanitizeHostname), derived here
// from the object as published by those rules, never by vminit's code.
// The differences vminit makes on purpose are the onPurpose list.
func TestCorpusMatchesKubeVirt(t *testing.T) {
	pairs := kubevirtCorpusPairs(t)
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) { compareKubeVirt(t, p.want, p.got) })
	}
	t.Logf("%d KubeVirt corpus objects compared with virt-launcher's delivery", len(pairs))
	if len(pairs) < 80 {
		t.Errorf("only %d objects compared; the corpus builds more", len(pairs))
	}
}

// kvPair is one corpus object that builds: what vminit delivers and what
// virt-launcher would.
type kvPair struct {
	name string // FILE, or FILE#KIND/NAME for one of several objects
	want *kvDelivery
	got  *seed.Seed
}

// kubevirtCorpusPairs reads every KubeVirt corpus object as build does
// (alone with --object KIND/NAME in a file of several) and pairs each that
// builds with virt-launcher's delivery for it.
func kubevirtCorpusPairs(t *testing.T) []kvPair {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "kubevirt", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pairs []kvPair
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		docs, err := platform.Split(name, data)
		if err != nil {
			continue // refused: TestCorpusKubeVirt holds why
		}
		keys, _ := convert.Contents(docs)
		if len(keys) < 2 {
			keys = []string{""} // the file, as build reads it
		}
		for _, key := range keys {
			rs, err := convert.Read(t.Context(), name, data, platform.Options{Object: key})
			if err != nil || len(rs) != 1 {
				continue
			}
			got, ok := vminitDelivers(rs[0])
			if !ok {
				continue
			}
			obj, secrets := kubevirtObject(t, docs, key)
			pairs = append(pairs, kvPair{strings.TrimSuffix(name+"#"+key, "#"), virtLauncher(t, obj, secrets), got})
		}
	}
	return pairs
}

// TestCorpusKubeVirtReadByCloudInit has cloud-init 22.4's NoCloud
// datasource read both disks of every corpus object that gets one, the
// files virt-launcher writes and vminit's, and wants it to find the same
// instance-id (but for the ids onPurpose lists), host name, user data,
// network configuration and meta-data; and that the user data vminit
// warns cloud-init ignores is what cloud-init finds no handler for.
func TestCorpusKubeVirtReadByCloudInit(t *testing.T) {
	cloudinittest.Require(t)
	var dirs []string
	var pairs []kvPair
	for _, p := range kubevirtCorpusPairs(t) {
		if p.want.label != "cidata" || strings.HasPrefix(string(p.got.Datasource), "ignition/") {
			continue
		}
		base := t.TempDir()
		kv, ours := filepath.Join(base, "kubevirt"), filepath.Join(base, "vminit")
		for _, d := range []string{kv, ours} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		md, _ := json.Marshal(p.want.meta) // virt-launcher writes JSON meta-data
		files := map[string][]byte{"meta-data": md}
		maps.Copy(files, p.want.files)
		for n, b := range files {
			if err := os.WriteFile(filepath.Join(kv, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.got.WriteDir(ours, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs, pairs = append(dirs, kv, ours), append(pairs, p)
	}
	var read []map[string]any
	cloudinittest.Run(t, noCloudBatch, map[string]any{"dirs": dirs}, &read)
	for i, p := range pairs {
		kv, ours := read[2*i], read[2*i+1]
		if p.want.randomID != "" {
			kv["instance_id"] = p.want.legacyUUID // onPurpose["random instance-id"]
		}
		if !reflect.DeepEqual(kv, ours) {
			t.Errorf("%s: cloud-init reads from vminit's disk\n\t%v\nand from KubeVirt's\n\t%v", p.name, ours, kv)
		}
		// What vminit warns cloud-init ignores (the quick-start's "Hi.")
		// is what cloud-init finds no handler for (an empty user-data,
		// too, but there is nothing to ignore).
		ud, _ := p.got.Lookup("user-data")
		ignored := errors.Is(cloudinit.CheckUserData(ud), cloudinit.ErrIgnored)
		if types := fmt.Sprint(ours["part_types"]); len(ud) > 0 && ignored != (types == "[text/x-not-multipart]") {
			t.Errorf("%s: vminit says cloud-init ignores the user data: %v; cloud-init's part types: %s", p.name, ignored, types)
		}
	}
	t.Logf("%d NoCloud disks read by cloud-init the same", len(pairs))
}

// noCloudBatch reads each directory of "dirs" as DataSourceNoCloud reads
// a cidata disk (cloudinittest.NoCloudReader's steps, for many disks in
// one process).
const noCloudBatch = `
import base64, json, sys
from cloudinit import user_data as ud, util
from cloudinit.sources import DataSourceNoCloud as nc
out = []
for d in json.load(sys.stdin)["dirs"]:
    seeded = util.pathprefix2dict(d, required=["user-data", "meta-data"], optional=["vendor-data", "network-config"])
    data = nc._merge_new_seed({"meta-data": {}, "user-data": "", "vendor-data": "", "network-config": None}, seeded)
    ds = nc.DataSourceNoCloud.__new__(nc.DataSourceNoCloud)
    ds.metadata = data["meta-data"]
    parts = ud.UserDataProcessor.__new__(ud.UserDataProcessor)
    parts.paths, parts.ssl_details = None, None
    types = [p.get_content_type() for p in parts.process(data["user-data"]).walk() if not ud.is_skippable(p)]
    out.append({"part_types": types, "instance_id": ds.get_instance_id(), "hostname": ds.get_hostname().hostname,
                "user_data": base64.b64encode(data["user-data"] or b"").decode(),
                "network_config": data["network-config"], "metadata": data["meta-data"]})
json.dump(out, sys.stdout, default=str)
`

// onPurpose are the differences from KubeVirt that vminit makes on
// purpose, each with its reason; compareKubeVirt names the one it allows.
var onPurpose = map[string]string{
	"random instance-id": "a bare VMI without a firmware UUID gets a new random instance-id from virt-launcher at every start, so cloud-init re-runs first boot; vminit gives it the id the VM controller would persist (CalculateLegacyUUID of the name)",
	"one key per line":   "KubeVirt passes each Secret value as one public-keys entry, so a value holding several keys authorises a broken first key only (kubevirt/kubevirt#17489); vminit passes one entry per line",
	"ignition hostname":  "vminit's Ignition config writes the VM's host name to /etc/hostname, which KubeVirt leaves to meta-data that Ignition does not read",
	"openstack shape":    "vminit's ConfigDrive meta_data.json also carries OpenStack's name and launch_index, which cloud-init's ConfigDrive reader knows",
}

// kvDelivery is what one VM's guest gets: the cloud-init disk's label and
// files, and the meta-data document parsed.
type kvDelivery struct {
	object     string
	label      string
	files      map[string][]byte // user data, network data; meta-data is meta
	meta       map[string]any
	randomID   string // the meta-data key whose value KubeVirt draws at random
	legacyUUID string // what the VM controller would persist for it
	sysprep    map[string][]byte
}

// kubevirtObject finds the object key names among docs ("" names the
// file's one KubeVirt object), as JSON, and the Secrets beside it.
func kubevirtObject(t *testing.T, docs []*platform.Document, key string) (map[string]any, map[string]map[string][]byte) {
	t.Helper()
	var objs []map[string]any
	for _, d := range docs {
		var o map[string]any
		if json.Unmarshal(d.JSON, &o) != nil {
			continue
		}
		if o["kind"] == "List" {
			items, _ := o["items"].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					objs = append(objs, m)
				}
			}
			continue
		}
		objs = append(objs, o)
	}
	secrets := map[string]map[string][]byte{}
	var found map[string]any
	for _, o := range objs {
		kind, _ := o["kind"].(string)
		name, _ := jsonAt(o, "metadata", "name").(string)
		api, _ := o["apiVersion"].(string)
		switch {
		case kind == "Secret" || kind == "ConfigMap":
			secrets[name] = secretData(o)
		case found == nil && (key == kind+"/"+name || key == "" && isKubeVirtVM(api, kind)):
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no object %q", key)
	}
	return found, secrets
}

// isKubeVirtVM reports whether apiVersion and kind are one of the VMs
// KubeVirt runs (not its instancetypes and preferences).
func isKubeVirtVM(apiVersion, kind string) bool {
	return strings.HasPrefix(apiVersion, "kubevirt.io/") && (kind == "VirtualMachine" || kind == "VirtualMachineInstance") ||
		strings.HasPrefix(apiVersion, "pool.kubevirt.io/") && kind == "VirtualMachinePool"
}

// secretData is a Secret's data (base64) and stringData, or a
// ConfigMap's data, by key.
func secretData(o map[string]any) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range asMap(o["data"]) {
		s, _ := v.(string)
		if o["kind"] == "ConfigMap" {
			out[k] = []byte(s)
			continue
		}
		b, _ := base64.StdEncoding.DecodeString(s)
		out[k] = b
	}
	for k, v := range asMap(o["stringData"]) {
		s, _ := v.(string)
		out[k] = []byte(s)
	}
	return out
}

// virtLauncher is what KubeVirt delivers for obj, by virt-launcher's rules.
func virtLauncher(t *testing.T, obj map[string]any, secrets map[string]map[string][]byte) *kvDelivery {
	t.Helper()
	api, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	name, _ := jsonAt(obj, "metadata", "name").(string)
	ns, _ := jsonAt(obj, "metadata", "namespace").(string)
	if ns == "" {
		ns = platform.DefaultNamespace
	}
	vmi, name, instancetype, secretSuffix := kvVMI(obj, kind, name)
	d := &kvDelivery{object: kind + " " + name, files: map[string][]byte{}}
	// dns.SanitizeHostname.
	hostname, _, _ := strings.Cut(name, ".")
	hostname = hostname[:min(len(hostname), 63)]
	if h, _ := vmi["hostname"].(string); h != "" {
		hostname = h
	}
	// cloudInitUUIDFromVMI, after the VM controller's setupStableFirmwareUUID.
	fwUUID, _ := jsonAt(vmi, "domain", "firmware", "uuid").(string)
	d.legacyUUID = uuid.NewSHA1(uuid.MustParse("6a1a24a1-4061-4607-8bf4-a3963d0c5895"), []byte(name)).String()
	random := false
	if fwUUID == "" {
		fwUUID, random = d.legacyUUID, kind == "VirtualMachineInstance"
	}
	volumes, _ := vmi["volumes"].([]any)
	for _, v := range volumes {
		vol := asMap(v)
		if sp := asMap(vol["sysprep"]); sp != nil && d.sysprep == nil {
			ref, _ := jsonAt(sp, "configMap", "name").(string)
			if ref == "" {
				ref, _ = jsonAt(sp, "secret", "name").(string)
			}
			d.sysprep = secrets[ref]
		}
	}
	ci, configDrive := firstCloudInit(volumes)
	if ci == nil {
		return d
	}
	keyName := func(field string) string { s, _ := jsonAt(ci, field, "name").(string); return s + secretSuffix }
	userData := kvData(t, ci, "userData", "secretRef", keyName("secretRef"), secrets, "userdata", "userData")
	if api == "kubevirt.io/v1alpha2" {
		userData = kvData(t, ci, "userData", "secretRef", keyName("secretRef"), secrets, "userdata")
		// v0.12.0's GenerateLocalData: NoCloud only, no network data.
		d.label = "cidata"
		d.files["user-data"] = userData
		d.meta = map[string]any{"instance-id": name + "." + ns, "local-hostname": hostname}
		return d
	}
	networkData := kvData(t, ci, "networkData", "networkDataSecretRef", keyName("networkDataSecretRef"), secrets, "networkdata", "networkData")
	keys := kvPublicKeys(vmi, configDrive, secretSuffix, secrets)
	if configDrive {
		d.label = "config-2"
		d.files["openstack/latest/user_data"] = userData
		if networkData != nil {
			d.files["openstack/latest/network_data.json"] = networkData
		}
		d.meta = map[string]any{"instance_id": name + "." + ns, "uuid": fwUUID, "hostname": hostname}
		if random {
			d.randomID = "uuid"
		}
		kvSetIf(d.meta, "instance_type", instancetype)
		if len(keys) > 0 {
			d.meta["public_keys"] = keys
		}
		return d
	}
	d.label = "cidata"
	d.files["user-data"] = userData
	if networkData != nil {
		d.files["network-config"] = networkData
	}
	d.meta = map[string]any{"instance-id": fwUUID, "local-hostname": hostname}
	if random {
		d.randomID = "instance-id"
	}
	kvSetIf(d.meta, "instance-type", instancetype)
	if len(keys) > 0 {
		d.meta["public-keys"] = keys
	}
	return d
}

// kvVMI is the VMI spec obj runs, the VMI's name, its instancetype and
// the suffix of its Secrets' names (a pool's member 0, which build reads
// by default).
func kvVMI(obj map[string]any, kind, name string) (vmi map[string]any, vmiName, instancetype, secretSuffix string) {
	switch kind {
	case "VirtualMachine":
		instancetype, _ = jsonAt(obj, "spec", "instancetype", "name").(string)
		return asMap(jsonAt(obj, "spec", "template", "spec")), name, instancetype, ""
	case "VirtualMachinePool":
		instancetype, _ = jsonAt(obj, "spec", "virtualMachineTemplate", "spec", "instancetype", "name").(string)
		if jsonAt(obj, "spec", "nameGeneration", "appendIndexToSecretRefs") == true {
			secretSuffix = "-0"
		}
		return asMap(jsonAt(obj, "spec", "virtualMachineTemplate", "spec", "template", "spec")), name + "-0", instancetype, secretSuffix
	}
	// A VMI: the annotations virt-controller sets from a VM's instancetype.
	ann := asMap(jsonAt(obj, "metadata", "annotations"))
	instancetype, _ = ann["kubevirt.io/cluster-instancetype-name"].(string)
	if instancetype == "" {
		instancetype, _ = ann["kubevirt.io/instancetype-name"].(string)
	}
	return asMap(obj["spec"]), name, instancetype, ""
}

// firstCloudInit is the first cloud-init volume's source in spec order, as
// ReadCloudInitVolumeDataSource takes it.
func firstCloudInit(volumes []any) (map[string]any, bool) {
	for _, v := range volumes {
		vol := asMap(v)
		if nc := asMap(vol["cloudInitNoCloud"]); nc != nil {
			return nc, false
		}
		if cd := asMap(vol["cloudInitConfigDrive"]); cd != nil {
			return cd, true
		}
	}
	return nil, false
}

// kvData is readRawOrBase64Data, else the first of keys in the Secret
// refName (resolveNoCloudSecrets, readFirstFoundFileFromDir); nil for none.
func kvData(t *testing.T, src map[string]any, field, refField, refName string, secrets map[string]map[string][]byte, keys ...string) []byte {
	if s, _ := src[field].(string); s != "" {
		return []byte(s)
	}
	if s, _ := src[field+"Base64"].(string); s != "" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("%sBase64: %v", field, err)
		}
		return b
	}
	if src[refField] == nil {
		return nil
	}
	for _, k := range keys {
		if v, ok := secrets[refName][k]; ok {
			return v
		}
	}
	return nil
}

// kvPublicKeys is resolveSSHPublicKeys: every non-empty file of each
// access credential's Secret (in name order, as os.ReadDir lists the
// mounted volume) is one entry, numbered from 0.
func kvPublicKeys(vmi map[string]any, configDrive bool, suffix string, secrets map[string]map[string][]byte) map[string]any {
	method := "noCloud"
	if configDrive {
		method = "configDrive"
	}
	keys := map[string]any{}
	creds, _ := vmi["accessCredentials"].([]any)
	for _, c := range creds {
		k := asMap(asMap(c)["sshPublicKey"])
		if k == nil || jsonAt(k, "propagationMethod", method) == nil {
			continue
		}
		name, _ := jsonAt(k, "source", "secret", "secretName").(string)
		data := secrets[name+suffix]
		names := make([]string, 0, len(data))
		for n := range data {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if len(data[n]) > 0 {
				keys[strconv.Itoa(len(keys))] = string(data[n])
			}
		}
	}
	return keys
}

// vminitDelivers is the guest's disk as vminit builds it for r (build's
// checks and layout); ok is false when it does not build.
func vminitDelivers(r *platform.Result) (*seed.Seed, bool) {
	if r.Instance == nil {
		return r.Sysprep, r.Sysprep != nil
	}
	rep := render.Instance(r.Instance, render.Target{NetworkConfigVersion: 2, LenientSchema: true})
	if !rep.OK() {
		return nil, false
	}
	if rep.Ignition == nil {
		return rep.Seed, rep.Seed != nil
	}
	ds := seed.Datasource(r.Instance.Spec.Datasource)
	s, err := delivery.Seed(rep.Ignition.Config, r.Instance, ds)
	if err != nil {
		return nil, false
	}
	s.Datasource = "ignition/" + ds // marks the Ignition agent for compareKubeVirt
	return s, true
}

func compareKubeVirt(t *testing.T, want *kvDelivery, got *seed.Seed) {
	t.Helper()
	if want.sysprep != nil && want.label == "" {
		for _, f := range got.Files {
			if !bytes.Equal(f.Data, want.sysprep[f.Path]) {
				t.Errorf("sysprep %s: %q, KubeVirt %q", f.Path, f.Data, want.sysprep[f.Path])
			}
		}
		if len(got.Files) != len(want.sysprep) {
			t.Errorf("sysprep disc: %d files, KubeVirt %d", len(got.Files), len(want.sysprep))
		}
		return
	}
	if got.Label != want.label {
		t.Errorf("label %q, KubeVirt %q", got.Label, want.label)
	}
	ignition := strings.HasPrefix(string(got.Datasource), "ignition/")
	for p, w := range want.files {
		g, _ := got.Lookup(p)
		if ignition && (p == "user-data" || p == "openstack/latest/user_data") {
			kvCompareIgnition(t, w, g)
			continue
		}
		if !bytes.Equal(g, w) {
			t.Errorf("%s:\n%q\nKubeVirt writes\n%q", p, g, w)
		}
	}
	metaPath := "meta-data"
	if got.Label == "config-2" {
		metaPath = "openstack/latest/meta_data.json"
	}
	raw, _ := got.Lookup(metaPath)
	var meta map[string]any
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		t.Fatalf("%s: %v", metaPath, err)
	}
	compareMeta(t, want, meta, ignition)
	if ignition {
		compareAfterburn(t, want.meta, meta)
	}
}

// compareAfterburn compares what Afterburn, the reader of an Ignition
// guest's meta-data, makes of vminit's meta-data and of KubeVirt's: its
// kubevirt provider's attributes and SSH keys.
func compareAfterburn(t *testing.T, kv, ours map[string]any) {
	t.Helper()
	want, got := afterburnKubeVirt(kv), afterburnKubeVirt(ours)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Afterburn reads %v from vminit's meta-data, %v from KubeVirt's", got, want)
	}
}

// afterburnKubeVirt is what Afterburn's kubevirt provider reads from
// meta-data (coreos/afterburn src/providers/kubevirt/cloudconfig.rs,
// MetaData and attributes): the instance id from instance-id or else
// uuid, the host name from hostname or else local-hostname, the
// instance_type, and the public_keys' values; "" for what is missing,
// which fails its attributes.
func afterburnKubeVirt(md map[string]any) map[string]string {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v, ok := md[k].(string); ok {
				return v
			}
		}
		return ""
	}
	return map[string]string{
		"AFTERBURN_KUBEVIRT_INSTANCE_ID":   first("instance-id", "uuid"),
		"AFTERBURN_KUBEVIRT_HOSTNAME":      first("hostname", "local-hostname"),
		"AFTERBURN_KUBEVIRT_INSTANCE_TYPE": first("instance_type"),
		"ssh keys":                         strings.Join(keyLines(md["public_keys"]), "\n"),
	}
}

// compareMeta compares each meta-data field KubeVirt writes, and wants no
// field KubeVirt does not write but those listed on purpose.
func compareMeta(t *testing.T, want *kvDelivery, got map[string]any, ignition bool) {
	t.Helper()
	for k, w := range want.meta {
		g, ok := got[k]
		switch {
		case k == want.randomID:
			w = want.legacyUUID
			t.Logf("on purpose: %s: %s", k, onPurpose["random instance-id"])
		case k == "public-keys" || k == "public_keys":
			w, g = keyLines(w), keyLines(g)
			t.Logf("on purpose: %s: %s", k, onPurpose["one key per line"])
		}
		if !ok || !reflect.DeepEqual(fmt.Sprint(g), fmt.Sprint(w)) {
			t.Errorf("meta-data %s: %v, KubeVirt %v", k, g, w)
		}
	}
	for k := range got {
		_, kv := want.meta[k]
		switch {
		case kv:
		case (k == "name" || k == "launch_index") && want.label == "config-2":
			t.Logf("on purpose: %s: %s", k, onPurpose["openstack shape"])
		case ignition && k == "public_keys" && len(asMap(got[k])) == 0:
		default:
			t.Errorf("meta-data %s: %v, which KubeVirt does not write", k, got[k])
		}
	}
}

// kvCompareIgnition compares the config KubeVirt delivers verbatim with the
// one vminit renders from it: the same users, and /etc/hostname besides.
func kvCompareIgnition(t *testing.T, kv, ours []byte) {
	t.Helper()
	var w, g map[string]any
	if err := json.Unmarshal(kv, &w); err != nil {
		t.Fatalf("KubeVirt's user data: %v", err)
	}
	if err := json.Unmarshal(ours, &g); err != nil {
		t.Fatalf("vminit's config: %v", err)
	}
	if !reflect.DeepEqual(w["passwd"], g["passwd"]) {
		t.Errorf("passwd %v, KubeVirt %v", g["passwd"], w["passwd"])
	}
	files, _ := jsonAt(g, "storage", "files").([]any)
	var paths []string
	for _, f := range files {
		p, _ := asMap(f)["path"].(string)
		paths = append(paths, p)
	}
	if !slices.Equal(paths, []string{"/etc/hostname"}) {
		t.Errorf("files %v, want /etc/hostname alone", paths)
	}
	t.Logf("on purpose: %s", onPurpose["ignition hostname"])
}

// keyLines is a public-keys map's keys, one per line, in entry order.
func keyLines(v any) []string {
	m := asMap(v)
	var out []string
	for i := range len(m) {
		s, _ := m[strconv.Itoa(i)].(string)
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
	}
	return out
}

func kvSetIf(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

// jsonAt walks a decoded JSON object along keys.
func jsonAt(v any, keys ...string) any {
	for _, k := range keys {
		v = asMap(v)[k]
	}
	return v
}
