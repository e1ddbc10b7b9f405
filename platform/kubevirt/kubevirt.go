// Package kubevirt reads KubeVirt's VirtualMachine, VirtualMachineInstance
// and VirtualMachinePool objects (decoded strictly with kubevirt.io/api's
// own types) and gives the guest what KubeVirt's virt-launcher would have
// given it, minus KubeVirt's known bugs:
//
//   - the first cloudInitNoCloud or cloudInitConfigDrive volume in spec order
//     (as virt-launcher takes it; later ones are ignored with a warning):
//     userData, userDataBase64 (gzip is decompressed) or secretRef (key
//     userdata, else userData) is the whole user-data file, as KubeVirt
//     writes it (spec.cloudInit.userData with userDataOnly: a script runs on
//     guests that read no MIME, such as KubeVirt's CirrOS demo); networkData, networkDataBase64 or
//     networkDataSecretRef (networkdata, else networkData) becomes
//     spec.cloudInit.networkConfig, checked against the datasource's format;
//     the volume type decides spec.datasource; user data that is an
//     Ignition config (a JSON object with an "ignition" key: KubeVirt's
//     documented path for Fedora CoreOS and RHCOS) is the guest's Ignition
//     config instead, built on the volume's kind of disk; user data
//     cloud-init ignores ("Hi.") is built as given, with a warning;
//   - instance-id: spec.domain.firmware.uuid, else the UUID the VM controller
//     persists (SHA-1 UUID of the name, CalculateLegacyUUID); a bare VMI
//     without a firmware UUID gets the same name-derived id instead of
//     KubeVirt's new random one at every start, which re-ran first boot;
//   - hostname: spec.hostname, else the name cut at the first dot, at most
//     63 characters;
//   - accessCredentials with noCloud or configDrive propagation: every key of
//     the Secret, split into one SSH key per line (KubeVirt passes a Secret
//     value holding several keys as one entry, so only the first works);
//   - ConfigDrive meta_data.json instance_id (<name>.<namespace>),
//     instance_type/instance-type, and devices for tagged interfaces whose
//     PCI address is given (KubeVirt reads the others from the libvirt
//     domain, which vminit does not have: those are left out with a
//     warning);
//   - the kubevirt.io/ignitiondata annotation: an Ignition config (spec 2.x
//     translated to spec 3), delivered on the config drive by default,
//     because Fedora CoreOS and RHCOS "kubevirt" images read Ignition from
//     config-2 or cidata, never from fw_cfg, which is where KubeVirt puts it
//     (and only when the text contains "ignition"); build it as a .ign file
//     for QEMU's fw_cfg instead;
//   - sysprep volumes: the answer-file disc (label unattendCD), refused unless
//     it holds a well-formed autounattend.xml or unattend.xml.
//
// kubevirt.io/v1alpha2 (KubeVirt v0.7 to v0.12) is read as it shipped
// (v1alpha2.go); kubevirt.io/v1alpha1 is refused as KubeVirt refuses it
// today, as a version no longer served.
//
// KubeVirt's 2 KiB limit on inline user and network data is an admission
// rule of its API server, not of the guest: it is a warning here. Every
// difference is listed in docs/platforms/kubevirt.md.
package kubevirt

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "kubevirt.io/api/core/v1"
	poolv1 "kubevirt.io/api/pool/v1beta1"

	"github.com/vminit/vminit/cloudbaseinit"
	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/ignition"
	"github.com/vminit/vminit/internal/lib/gzipbound"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/sysprep"
	"github.com/vminit/vminit/seed"
	"github.com/vminit/vminit/spec"
)

// SysprepLabel is the volume label of a sysprep answer-file disc, as
// virt-launcher makes it.
const SysprepLabel = "unattendCD"

// SysprepDisc is that disc: virt-launcher wants autounattend.xml or
// unattend.xml on it.
var SysprepDisc = sysprep.Disc{Answers: []string{"autounattend.xml", "unattend.xml"},
	How: "as KubeVirt delivers it, on the disc labelled " + SysprepLabel}

// The annotations KubeVirt reads on a VMI.
const (
	AnnotationIgnition            = "kubevirt.io/ignitiondata"
	AnnotationInstancetype        = "kubevirt.io/instancetype-name"
	AnnotationClusterInstancetype = "kubevirt.io/cluster-instancetype-name"
	AnnotationPreference          = "kubevirt.io/preference-name"
	AnnotationClusterPreference   = "kubevirt.io/cluster-preference-name"
	// AnnotationOS is the OS the common templates name on a VM
	// ("windows2k22"…).
	AnnotationOS = "vm.kubevirt.io/os"
)

const (
	annotationPrefix    = "metadata.annotations"
	inlineLimit         = 2048 // KubeVirt's cloudInitUserMaxLen and cloudInitNetworkMaxLen
	maxHostname         = 63
	legacyUUIDNamespace = "6a1a24a1-4061-4607-8bf4-a3963d0c5895"
)

// Recognizes reports whether apiVersion and kind are an object this
// package reads.
func Recognizes(apiVersion, kind string) bool {
	switch apiVersion {
	case "kubevirt.io/v1", "kubevirt.io/v1alpha3":
		return kind == "VirtualMachine" || kind == "VirtualMachineInstance"
	case "kubevirt.io/v1alpha2":
		return kind == "VirtualMachine" || kind == "VirtualMachineInstance"
	case "kubevirt.io/v1alpha1":
		// Not served since 2018: recognised to say so (Convert).
		return v1alpha1Kinds[kind] != ""
	case "pool.kubevirt.io/v1alpha1", "pool.kubevirt.io/v1beta1":
		return kind == "VirtualMachinePool"
	}
	return false
}

// v1alpha1Kinds maps the kinds of kubevirt.io/v1alpha1 to today's.
var v1alpha1Kinds = map[string]string{
	"VirtualMachine":           "VirtualMachineInstance",
	"OfflineVirtualMachine":    "VirtualMachine",
	"VirtualMachineReplicaSet": "VirtualMachineInstanceReplicaSet",
	"VirtualMachinePreset":     "VirtualMachineInstancePreset",
}

// LegacyUUID is the firmware UUID KubeVirt's VM controller persists for a
// VM without one: a SHA-1 (version 5) UUID of the VM's name alone.
func LegacyUUID(name string) string {
	return uuid.NewSHA1(uuid.MustParse(legacyUUIDNamespace), []byte(name)).String()
}

// vmi is what the conversion needs of any of the kinds: the VMI's name,
// namespace, annotations and spec, and where they are in the object.
type vmi struct {
	name, namespace string
	annotations     map[string]string
	annPath         string // the annotations' object path
	spec            *v1.VirtualMachineInstanceSpec
	path            string // the VMI spec's object path
	instancetype    string
	// windows is the object path that says the guest is Windows (a
	// windows* preference, a common template's OS label or annotation),
	// or "": its cloud-init volume is read by cloudbase-init.
	windows string
	// secretSuffix is appended to Secret names (VM pools'
	// appendIndexToSecretRefs); configMapSuffix to ConfigMap names.
	secretSuffix, configMapSuffix string
	// v1alpha2 is set for kubevirt.io/v1alpha2 objects, which KubeVirt
	// of 2018 gave the instance-id <name>.<namespace> and read the
	// Secret's key userdata alone.
	v1alpha2 bool
}

// Convert converts a KubeVirt object.
func Convert(ctx context.Context, doc *platform.Document, opts platform.Options) (*platform.Result, error) {
	switch doc.APIVersion {
	case "kubevirt.io/v1alpha2":
		return convertV1alpha2(ctx, doc, opts)
	case "kubevirt.io/v1alpha1":
		return nil, spec.Errors{doc.Error("apiVersion", fmt.Sprintf(
			"kubevirt.io/v1alpha1 is no longer served: KubeVirt replaced it with v1alpha2 in v0.7.0 (2018), so kubectl apply fails with no matches for kind %q in version \"kubevirt.io/v1alpha1\"; its %s is today's kubevirt.io/v1 %s: write it as that",
			doc.Kind, doc.Kind, v1alpha1Kinds[doc.Kind]))}
	}
	var m vmi
	switch doc.Kind {
	case "VirtualMachine":
		var vm v1.VirtualMachine
		if err := decode(doc, &vm); err != nil {
			return nil, err
		}
		if vm.Spec.Template == nil {
			return nil, spec.Errors{doc.Error("spec.template", templateRequired)}
		}
		m = vmi{name: vm.Name, namespace: vm.Namespace, annotations: vm.Spec.Template.ObjectMeta.Annotations,
			annPath: "spec.template.metadata.annotations", spec: &vm.Spec.Template.Spec, path: "spec.template.spec"}
		m.instancetype = instancetypeOf(vm.Spec.Instancetype)
		m.windows = windowsHint(vm.Spec.Preference, "spec.preference.name", &vm.ObjectMeta, "metadata", &vm.Spec.Template.ObjectMeta, "spec.template.metadata")
	case "VirtualMachineInstance":
		var v v1.VirtualMachineInstance
		if err := decode(doc, &v); err != nil {
			return nil, err
		}
		m = vmi{name: v.Name, namespace: v.Namespace, annotations: v.Annotations, annPath: annotationPrefix, spec: &v.Spec, path: "spec"}
		m.instancetype = v.Annotations[AnnotationClusterInstancetype]
		if m.instancetype == "" {
			m.instancetype = v.Annotations[AnnotationInstancetype]
		}
		m.windows = windowsHint(nil, "", &v.ObjectMeta, "metadata", nil, "")
	case "VirtualMachinePool":
		var p poolv1.VirtualMachinePool
		if err := decode(doc, &p); err != nil {
			return nil, err
		}
		t := p.Spec.VirtualMachineTemplate
		if t == nil || t.Spec.Template == nil {
			return nil, spec.Errors{doc.Error("spec.virtualMachineTemplate.spec.template", "required: the VirtualMachineInstance template; KubeVirt's API server refuses a VirtualMachinePool without one")}
		}
		if r := p.Spec.Replicas; r != nil && opts.PoolIndex >= int(*r) {
			return nil, spec.Errors{doc.Error("spec.replicas", fmt.Sprintf("the pool has %d members; there is no member %d: KubeVirt's pool controller makes members 0 to %d (%s-0 …)", *r, opts.PoolIndex, *r-1, p.Name))}
		}
		idx := fmt.Sprintf("-%d", opts.PoolIndex)
		m = vmi{name: p.Name + idx, namespace: p.Namespace, annotations: t.Spec.Template.ObjectMeta.Annotations,
			annPath: "spec.virtualMachineTemplate.spec.template.metadata.annotations", spec: &t.Spec.Template.Spec,
			path: "spec.virtualMachineTemplate.spec.template.spec"}
		m.instancetype = instancetypeOf(t.Spec.Instancetype)
		m.windows = windowsHint(t.Spec.Preference, "spec.virtualMachineTemplate.spec.preference.name", &t.ObjectMeta, "spec.virtualMachineTemplate.metadata", &t.Spec.Template.ObjectMeta, "spec.virtualMachineTemplate.spec.template.metadata")
		if ng := p.Spec.NameGeneration; ng != nil {
			if ng.AppendIndexToSecretRefs != nil && *ng.AppendIndexToSecretRefs {
				m.secretSuffix = idx
			}
			if ng.AppendIndexToConfigMapRefs != nil && *ng.AppendIndexToConfigMapRefs {
				m.configMapSuffix = idx
			}
		}
	default:
		return nil, fmt.Errorf("%w: %s %s", platform.ErrUnknownKind, doc.APIVersion, doc.Kind)
	}
	if m.name == "" {
		return nil, spec.Errors{doc.Error("metadata.name", nameRequired)}
	}
	m.namespace = opts.NamespaceOf(m.namespace)
	return m.convert(ctx, doc, opts)
}

// What KubeVirt's API server says of an object it refuses.
const (
	templateRequired = "required: the VirtualMachineInstance template; KubeVirt's API server refuses a VirtualMachine without one"
	nameRequired     = "required: the API server refuses an object without a name (kubectl: resource name may not be empty)"
)

// decode decodes doc strictly into v, saying of each problem what
// kubectl and KubeVirt's API server do with it: they refuse it, as here.
func decode(doc *platform.Document, v any) error {
	err := doc.Decode(v)
	es := spec.AsErrors(err)
	if es == nil {
		return err
	}
	out := make(spec.Errors, len(es))
	for i, e := range es {
		e := *e // the document may hold its problems: copy, never edit
		out[i] = &e
		switch {
		case e.Message == "unknown field":
			e.Message += ": kubectl apply (its strict field validation) and KubeVirt's API server refuse it"
		case e.Message == "given twice":
			e.Message += ": kubectl apply's strict field validation refuses it (duplicate field)"
		case strings.HasPrefix(e.Message, "want ") || strings.HasPrefix(e.Message, "wrong type"):
			e.Message += "; the API server refuses the object"
		}
	}
	return out
}

func instancetypeOf(it *v1.InstancetypeMatcher) string {
	if it == nil {
		return ""
	}
	return it.Name
}

// Hostname is the guest's host name as KubeVirt computes it: spec.hostname,
// else the name up to its first dot, at most 63 characters.
func Hostname(name, specHostname string) string {
	if specHostname != "" {
		return specHostname
	}
	h, _, _ := strings.Cut(name, ".")
	if len(h) > maxHostname {
		h = h[:maxHostname]
	}
	return h
}

func (m *vmi) convert(ctx context.Context, doc *platform.Document, opts platform.Options) (*platform.Result, error) {
	b := platform.NewBuilder(doc, m.name)
	s := &b.Instance.Spec
	s.Hostname = Hostname(m.name, m.spec.Hostname)
	b.From("spec.hostname", m.path+".hostname")
	b.From("metadata.name", "metadata.name")
	s.InstanceID = LegacyUUID(m.name)
	if m.v1alpha2 {
		s.InstanceID = m.name + "." + m.namespace
		b.From("spec.instanceID", "metadata.name")
	} else if fw := m.spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		s.InstanceID = string(fw.UUID)
		b.From("spec.instanceID", m.path+".domain.firmware.uuid")
	}

	ci, ciPath := m.cloudInitVolume(b)
	ign, hasIgn := m.annotations[AnnotationIgnition]
	ignPath := fmt.Sprintf("%s[%q]", m.annPath, AnnotationIgnition)
	switch {
	case hasIgn && ci != nil:
		b.Errorf(ignPath, "the VM also has the cloud-init volume %s: Fedora CoreOS and RHCOS kubevirt images read Ignition from that disk, so the guest would get the volume's user data instead of this config; remove one", ciPath)
	case hasIgn:
		m.ignition(b, ign, ignPath, "KubeVirt passes it to QEMU's fw_cfg unchecked")
	case ci != nil:
		m.cloudInit(ctx, b, ci, ciPath, opts)
		if m.windows != "" && s.Agent == "" {
			// The same disk, read by Windows' agent: its user data is
			// checked as cloudbase-init reads it.
			s.Agent = spec.AgentCloudbaseInit
			b.From("spec.agent", m.windows)
		}
	}
	m.accessCredentials(ctx, b, ci, opts)
	sysprep := m.sysprep(ctx, b, opts)
	if ci == nil && !hasIgn && sysprep == nil {
		b.Errorf(m.path+".volumes", "no cloudInitNoCloud, cloudInitConfigDrive or sysprep volume and no %s annotation: KubeVirt gives this VM no first-boot data", AnnotationIgnition)
	}
	if b.HasErrors() {
		_, err := b.Finish("")
		return nil, err
	}
	if ci == nil && !hasIgn {
		// A Windows VM: the answer-file disc is everything.
		r := &platform.Result{Object: object(doc, m), Sysprep: sysprep, Warnings: b.Warnings}
		return r, nil
	}
	r, err := b.Finish(object(doc, m))
	if err != nil {
		return nil, err
	}
	r.Sysprep = sysprep
	return r, nil
}

// windowsHint is the path of the first thing in a VM's object that says
// its guest is Windows: a preference whose name starts with "windows"
// (KubeVirt's common preferences: windows.11, windows.2k22…), a common
// template's os.template.kubevirt.io/win* label or vm.kubevirt.io/os
// annotation, or the preference annotation virt-controller puts on a
// VMI. Either ObjectMeta may be nil.
func windowsHint(pref *v1.PreferenceMatcher, prefPath string, meta *metav1.ObjectMeta, metaPath string, tmpl *metav1.ObjectMeta, tmplPath string) string {
	isWin := func(v string) bool { return strings.HasPrefix(strings.ToLower(v), "win") }
	if pref != nil && isWin(pref.Name) {
		return prefPath
	}
	for _, o := range []struct {
		m    *metav1.ObjectMeta
		path string
	}{{meta, metaPath}, {tmpl, tmplPath}} {
		if o.m == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(o.m.Labels)) {
			if name, ok := strings.CutPrefix(k, "os.template.kubevirt.io/"); ok && isWin(name) && o.m.Labels[k] == "true" {
				return fmt.Sprintf("%s.labels[%q]", o.path, k)
			}
		}
		for _, k := range []string{AnnotationOS, AnnotationClusterPreference, AnnotationPreference} {
			if isWin(o.m.Annotations[k]) {
				return fmt.Sprintf("%s.annotations[%q]", o.path, k)
			}
		}
	}
	return ""
}

func object(doc *platform.Document, m *vmi) string {
	return fmt.Sprintf("KubeVirt %s %s/%s", doc.Kind, m.namespace, m.name)
}

// cloudInit is a cloud-init volume of either kind: the two have the same
// fields.
type cloudInit struct {
	configDrive                    bool
	userData, userDataBase64       string
	userDataSecret                 *corev1.LocalObjectReference
	networkData, networkDataBase64 string
	networkDataSecret              *corev1.LocalObjectReference
}

// cloudInitVolume returns the first cloud-init volume, as virt-launcher
// takes it, warning about the others.
func (m *vmi) cloudInitVolume(b *platform.Builder) (*cloudInit, string) {
	var found *cloudInit
	var foundPath string
	for i, v := range m.spec.Volumes {
		var c *cloudInit
		var p string
		switch {
		case v.CloudInitNoCloud != nil:
			n := v.CloudInitNoCloud
			c = &cloudInit{userData: n.UserData, userDataBase64: n.UserDataBase64, userDataSecret: n.UserDataSecretRef, networkData: n.NetworkData, networkDataBase64: n.NetworkDataBase64, networkDataSecret: n.NetworkDataSecretRef}
			p = fmt.Sprintf("%s.volumes[%d].cloudInitNoCloud", m.path, i)
		case v.CloudInitConfigDrive != nil:
			n := v.CloudInitConfigDrive
			c = &cloudInit{configDrive: true, userData: n.UserData, userDataBase64: n.UserDataBase64, userDataSecret: n.UserDataSecretRef, networkData: n.NetworkData, networkDataBase64: n.NetworkDataBase64, networkDataSecret: n.NetworkDataSecretRef}
			p = fmt.Sprintf("%s.volumes[%d].cloudInitConfigDrive", m.path, i)
		default:
			continue
		}
		if found != nil {
			b.Warnf(p, "ignored: only the first cloud-init volume (%s) is used, as in KubeVirt", foundPath)
			continue
		}
		found, foundPath = c, p
	}
	return found, foundPath
}

func (m *vmi) cloudInit(ctx context.Context, b *platform.Builder, c *cloudInit, path string, opts platform.Options) {
	s := &b.Instance.Spec
	s.Datasource = spec.DatasourceNoCloud
	if c.configDrive {
		s.Datasource = spec.DatasourceConfigDrive
	}
	udKeys := []string{"userdata", "userData"}
	if m.v1alpha2 {
		udKeys = udKeys[:1]
	}
	ud, udFrom, udOK := m.data(ctx, b, path, "userData", c.userData, c.userDataBase64, "secretRef", c.userDataSecret, udKeys, opts)
	nd, ndFrom, ndOK := m.data(ctx, b, path, "networkData", c.networkData, c.networkDataBase64, "networkDataSecretRef", c.networkDataSecret, []string{"networkdata", "networkData"}, opts)
	if !udOK && !ndOK && !b.HasErrors() {
		b.Errorf(path, "needs user data or network data (userData, userDataBase64, secretRef, networkData, networkDataBase64 or networkDataSecretRef); virt-api's webhook refuses the VM (\"must have at least one userdatasource or one networkdatasource set\")")
	}
	if udOK {
		ud = gunzip(b, path, ud)
		if ignition.LooksLikeConfig(ud) {
			m.ignitionUserData(b, c, path, ud, udFrom, ndOK)
			// The drive's meta-data as virt-launcher writes it beside
			// any user data: Afterburn reads it (instance_type among it).
			m.metaData(b, c)
			return
		}
	}
	// Written as KubeVirt writes it, alone (empty when the volume has
	// network data only): what the guest of a script (KubeVirt's CirrOS
	// demo) runs; the host name is meta-data.
	s.CloudInit.UserDataOnly = true
	if udOK {
		s.CloudInit.UserData = string(ud)
		b.From("spec.cloudInit.userData", udFrom.path)
		m.warnIgnored(b, udFrom, s.CloudInit.UserData)
	}
	if ndOK && !c.configDrive {
		var wrapped bool
		if nd, wrapped = unwrapNetwork(nd); wrapped {
			b.TextRewritten("spec.cloudInit.networkConfig")
			b.Warnf(ndFrom.path, "unwrapped from its top-level network: key%s: KubeVirt writes it as given, which cloud-init before 22.2 cannot read (it finds no version and configures no network); vminit writes what is inside", ndFrom.what)
		}
	}
	if ndOK {
		s.CloudInit.NetworkConfig = string(nd)
		b.From("spec.cloudInit.networkConfig", ndFrom.path)
	}
	m.metaData(b, c)
}

// metaData sets the meta-data KubeVirt writes beyond the instance-id,
// host name and keys (which the spec carries): ConfigDrive's instance_id,
// the instancetype, tagged devices.
func (m *vmi) metaData(b *platform.Builder, c *cloudInit) {
	s := &b.Instance.Spec
	if c.configDrive {
		md := map[string]any{"instance_id": m.name + "." + m.namespace}
		if m.instancetype != "" {
			md["instance_type"] = m.instancetype
		}
		if devs := m.devices(b); len(devs) > 0 {
			md["devices"] = devs
		}
		s.CloudInit.MetaData = md
	} else if m.instancetype != "" {
		s.CloudInit.MetaData = map[string]any{"instance-type": m.instancetype}
	}
}

// warnIgnored warns of user data that cloud-init ignores (the quick-start
// VM's "Hi."): KubeVirt delivers it, and so does vminit (spec.cloudInit.
// userDataOnly builds it as given). from names its field and, for a
// Secret, the Secret and key.
func (m *vmi) warnIgnored(b *platform.Builder, from dataFrom, ud string) {
	if m.windows != "" || !errors.Is(cloudinit.CheckUserData([]byte(ud)), cloudinit.ErrIgnored) {
		return // a Windows guest's is checked as cloudbase-init reads it
	}
	first, _, _ := strings.Cut(strings.TrimSpace(ud), "\n")
	hint := "start it with #cloud-config or #! to have it run"
	if f, err := cloudbaseinit.Classify([]byte(ud)); err == nil && f.Kind == cloudbaseinit.KindScript {
		hint = fmt.Sprintf("it is Windows user data (%s, which cloudbase-init runs with its %s executor): a Windows VM says so with a windows* preference or a common template's os.template.kubevirt.io/win* label, and its volume is then read as cloudbase-init's", f.Header, f.Executor)
	}
	b.WarnCause("spec.cloudInit.userData", cloudinit.ErrIgnored, from.path, "%s: KubeVirt delivers this as the user-data file, and so does vminit, but cloud-init ignores it%s: its first line %q is no #cloud-config, #! or other part header cloud-init knows (cloud-init 22.4 logs it as unhandled text/x-not-multipart); %s",
		object(b.Doc, m), from.what, first, hint)
}

// ignitionUserData takes user data that is an Ignition config (KubeVirt's
// documented path for Fedora CoreOS and RHCOS: virt-launcher writes it as
// the volume's user data, which Ignition's kubevirt platform reads from
// config-2 or cidata) as the guest's Ignition config, built on the
// volume's kind of disk like the kubevirt.io/ignitiondata annotation.
func (m *vmi) ignitionUserData(b *platform.Builder, c *cloudInit, path string, ud []byte, from dataFrom, hasNetwork bool) {
	m.ignition(b, string(ud), from.path, "virt-launcher writes it unchecked as the user data")
	if !c.configDrive {
		b.Instance.Spec.Datasource = spec.DatasourceNoCloud
	}
	if hasNetwork {
		b.Warnf(path+".networkData", "ignored: KubeVirt writes it beside the Ignition config%s, but Ignition reads no network data; configure the network in the config", from.what)
	}
}

// dataFrom is where user or network data was read: the object's field,
// and for a Secret which one and which key.
type dataFrom struct{ path, what string }

// data reads one of user or network data from its three sources, of which
// at most one may be set.
func (m *vmi) data(ctx context.Context, b *platform.Builder, path, field, inline, b64, refField string, ref *corev1.LocalObjectReference, keys []string, opts platform.Options) ([]byte, dataFrom, bool) {
	var set []string
	if inline != "" {
		set = append(set, field)
	}
	if b64 != "" {
		set = append(set, field+"Base64")
	}
	if ref != nil {
		set = append(set, refField)
	}
	if len(set) > 1 {
		// virt-api's words for the two (vmi-create-admitter.go).
		kv := map[string]string{"userData": "userdatasource", "networkData": "networkdata source"}[field]
		b.Errorf(path, "sets %s: give at most one source of %s; virt-api's webhook refuses the VM (\"must have only one %s set\")", strings.Join(set, " and "), field, kv)
		return nil, dataFrom{}, false
	}
	switch {
	case inline != "":
		if len(inline) > inlineLimit {
			b.Warnf(path+"."+field, "%d bytes: KubeVirt's API server refuses more than %d bytes inline (its admission rule, not the guest's); vminit builds it, but to run it on KubeVirt move it to a Secret (%s)", len(inline), inlineLimit, refField)
		}
		return []byte(inline), dataFrom{path: path + "." + field}, true
	case b64 != "":
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			b.Errorf(path+"."+field+"Base64", "not base64: virt-api's webhook refuses the VM (\"%sBase64 is not a valid base64 value\"): %v", field, err)
			return nil, dataFrom{}, false
		}
		if len(data) > inlineLimit {
			b.Warnf(path+"."+field+"Base64", "%d bytes decoded: KubeVirt's API server refuses more than %d bytes inline (its admission rule, not the guest's); vminit builds it, but to run it on KubeVirt move it to a Secret (%s)", len(data), inlineLimit, refField)
		}
		return data, dataFrom{path: path + "." + field + "Base64"}, true
	case ref != nil:
		p := path + "." + refField + ".name"
		if ref.Name == "" {
			b.Errorf(p, "required: the Secret's name; KubeVirt counts a secretRef without one as no source")
			return nil, dataFrom{}, false
		}
		src, err := platform.Fetch(ctx, opts.Resolver, "secret", m.namespace, ref.Name+m.secretSuffix)
		if err != nil {
			b.Err(p, withKubeVirt(err))
			return nil, dataFrom{}, false
		}
		key, data, err := src.Key(keys...)
		if err != nil {
			b.Err(p, withKubeVirt(err))
			return nil, dataFrom{}, false
		}
		return data, dataFrom{path: p, what: fmt.Sprintf(" (Secret %q key %q)", src.Name, key)}, true
	}
	return nil, dataFrom{}, false
}

// withKubeVirt adds to a referenced object's problem what KubeVirt does
// without it: virt-launcher's pod mounts Secrets and ConfigMaps as volumes
// and reads only the keys it knows.
func withKubeVirt(err error) error {
	switch {
	case errors.Is(err, platform.ErrNotFound):
		return fmt.Errorf("%w: KubeVirt's virt-launcher pod mounts it as a volume and does not start without it", err)
	case errors.Is(err, platform.ErrMissingKey):
		return fmt.Errorf("%w: virt-launcher reads only these keys of the mounted Secret, so the guest would get none of this data", err)
	}
	return err
}

// gunzip decompresses gzip user data, as cloud-init does before reading
// it, so that the spec carries text.
func gunzip(b *platform.Builder, path string, data []byte) []byte {
	if !gzipbound.IsGzip(data) {
		return data
	}
	out, err := gzipbound.Decompress(data, 64<<20)
	if err != nil {
		b.Errorf(path, "gzip user data does not decompress: %v", err)
		return nil
	}
	return out
}

// devices is ConfigDrive's devices list for tagged interfaces, in
// KubeVirt's shape.
func (m *vmi) devices(b *platform.Builder) []any {
	var out []any
	for i, nic := range m.spec.Domain.Devices.Interfaces {
		if nic.Tag == "" {
			continue
		}
		p := fmt.Sprintf("%s.domain.devices.interfaces[%d]", m.path, i)
		if nic.PciAddress == "" {
			b.Warnf(p+".tag", "left out of meta_data.json devices: KubeVirt reads the NIC's PCI address from the running domain; give pciAddress to have it listed")
			continue
		}
		d := map[string]any{"type": "nic", "bus": "pci", "address": nic.PciAddress, "tags": []any{nic.Tag}}
		if nic.MacAddress != "" {
			d["mac"] = nic.MacAddress
		}
		out = append(out, d)
	}
	for i, hd := range m.spec.Domain.Devices.HostDevices {
		if hd.Tag != "" {
			b.Warnf(fmt.Sprintf("%s.domain.devices.hostDevices[%d].tag", m.path, i), "left out of meta_data.json devices: its guest PCI address is known only to the running domain")
		}
	}
	for i, g := range m.spec.Domain.Devices.GPUs {
		if g.Tag != "" {
			b.Warnf(fmt.Sprintf("%s.domain.devices.gpus[%d].tag", m.path, i), "left out of meta_data.json devices: its guest PCI address is known only to the running domain")
		}
	}
	return out
}

// accessCredentials adds the SSH keys KubeVirt propagates through the
// cloud-init volume, one per line.
func (m *vmi) accessCredentials(ctx context.Context, b *platform.Builder, ci *cloudInit, opts platform.Options) {
	s := &b.Instance.Spec
	for i, ac := range m.spec.AccessCredentials {
		p := fmt.Sprintf("%s.accessCredentials[%d]", m.path, i)
		if ac.UserPassword != nil {
			b.Warnf(p+".userPassword", "ignored: KubeVirt sets it at run time through the guest agent; it is no first-boot data")
		}
		k := ac.SSHPublicKey
		if k == nil {
			continue
		}
		pm := k.PropagationMethod
		if pm.QemuGuestAgent != nil {
			b.Warnf(p+".sshPublicKey.propagationMethod.qemuGuestAgent", "ignored: KubeVirt pushes these keys at run time through the guest agent; they are no first-boot data")
			continue
		}
		switch {
		case pm.NoCloud != nil && (ci == nil || ci.configDrive):
			b.Errorf(p+".sshPublicKey.propagationMethod.noCloud", "needs a cloudInitNoCloud volume; virt-api's webhook refuses the VM (\"requires a noCloud volume to exist when the noCloud propagationMethod is in use\")")
			continue
		case pm.ConfigDrive != nil && (ci == nil || !ci.configDrive):
			b.Errorf(p+".sshPublicKey.propagationMethod.configDrive", "needs a cloudInitConfigDrive volume; virt-api's webhook refuses the VM (\"requires a configDrive volume to exist when the configDrive propagationMethod is in use\")")
			continue
		case pm.NoCloud == nil && pm.ConfigDrive == nil:
			b.Errorf(p+".sshPublicKey.propagationMethod", "required: noCloud, configDrive or qemuGuestAgent; virt-api's webhook refuses the VM (\"must have exactly one propagationMethod set\")")
			continue
		}
		if k.Source.Secret == nil || k.Source.Secret.SecretName == "" {
			b.Errorf(p+".sshPublicKey.source.secret.secretName", "required: the Secret holding the keys; virt-api's webhook refuses the VM without one (\"must have exactly one source set\")")
			continue
		}
		sp := p + ".sshPublicKey.source.secret.secretName"
		src, err := platform.Fetch(ctx, opts.Resolver, "secret", m.namespace, k.Source.Secret.SecretName+m.secretSuffix)
		if err != nil {
			b.Err(sp, withKubeVirt(err))
			continue
		}
		// KubeVirt reads the mounted Secret's files in name order.
		for _, key := range src.Keys() {
			for _, line := range strings.Split(string(src.Data[key]), "\n") {
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					b.From(fmt.Sprintf("spec.sshAuthorizedKeys[%d]", len(s.SSHAuthorizedKeys)), fmt.Sprintf("%s (key %q)", sp, key))
					s.SSHAuthorizedKeys = append(s.SSHAuthorizedKeys, line)
				}
			}
		}
	}
}

// ignition takes text (the kubevirt.io/ignitiondata annotation, or user
// data that is an Ignition config) as the guest's Ignition config; kv says
// how KubeVirt delivers it, for a config that cannot be read.
func (m *vmi) ignition(b *platform.Builder, text, path, kv string) {
	s := &b.Instance.Spec
	cfg, from, err := ignition.Upgrade([]byte(text))
	var se *ignition.SyntaxError
	switch {
	case errors.As(err, &se):
		b.TextErrorf(path, se.Line, se.Column, "not JSON: %v: %s, and the guest's Ignition fails on it at boot", se.Err, kv)
		return
	case err != nil:
		b.Errorf(path, "%v: %s, and the guest's Ignition fails on it at boot", err, kv)
		return
	}
	if !strings.HasPrefix(from, "3.") {
		b.Warnf(path, "Ignition spec %s translated to spec 3 (Fedora CoreOS and RHCOS since 4.6 read only spec 3)", from)
	}
	s.Agent = spec.AgentIgnition
	s.Datasource = spec.DatasourceConfigDrive
	s.Ignition.Config = string(cfg)
	b.From("spec.ignition.config", path)
	// KubeVirt's hostname and instance-id are meta-data, which Ignition
	// does not read; the config drive carries them for other readers, and
	// the spec's hostname is written to /etc/hostname.
}

// sysprep builds the answer-file disc of the first sysprep volume.
func (m *vmi) sysprep(ctx context.Context, b *platform.Builder, opts platform.Options) *seed.Seed {
	for i, v := range m.spec.Volumes {
		sp := v.Sysprep
		if sp == nil {
			continue
		}
		p := fmt.Sprintf("%s.volumes[%d].sysprep", m.path, i)
		var src *platform.Source
		var err error
		switch {
		case sp.ConfigMap != nil && sp.Secret != nil:
			b.Errorf(p, "sets both configMap and secret: KubeVirt's virt-controller mounts the secret and ignores the configMap; give one")
			return nil
		case sp.ConfigMap != nil:
			p += ".configMap.name"
			src, err = platform.Fetch(ctx, opts.Resolver, "configmap", m.namespace, sp.ConfigMap.Name+m.configMapSuffix)
		case sp.Secret != nil:
			p += ".secret.name"
			src, err = platform.Fetch(ctx, opts.Resolver, "secret", m.namespace, sp.Secret.Name+m.secretSuffix)
		default:
			b.Errorf(p, "needs configMap or secret; KubeVirt's virt-controller cannot make the VM's pod (\"Sysprep must have Secret or ConfigMap reference set\")")
			return nil
		}
		if err != nil {
			b.Err(p, withKubeVirt(err))
			return nil
		}
		disc := &seed.Seed{Datasource: "sysprep", Label: SysprepLabel}
		answer, badKeys := "", false // an answer file's key
		for _, k := range src.Keys() {
			// Each key names a file on the disc, by the rule every
			// medium applies; said here, it names the object and key.
			if err := seed.CheckPath(k); err != nil {
				b.Errorf(p, "%s %q: key %q %v: the disc's files are named by its keys (the API server refuses such a key: keys are made of [-._a-zA-Z0-9])", src.Kind, src.Name, k, err)
				badKeys = true
				continue
			}
			disc.Files = append(disc.Files, seed.File{Path: k, Data: src.Data[k]})
			if SysprepDisc.IsAnswer(k) {
				answer = k
				if a, err := sysprep.Read(src.Data[k]); err != nil {
					b.Errorf(p, "%s %q: %s is not well-formed XML: KubeVirt delivers it unchecked, and Windows setup would stop on it: %v", src.Kind, src.Name, k, err)
				} else {
					b.Warnf(p, "%s %q: %s", src.Kind, src.Name, sysprep.Report(k, a, SysprepDisc.How))
				}
			}
		}
		if badKeys {
			return nil
		}
		if answer == "" {
			b.Errorf(p, "%s %q has no autounattend.xml or unattend.xml key (it has %s): Windows setup would find no answer file, and virt-launcher does not start the VM (\"Sysprep drive should contain autounattend.xml or unattend.xml but neither were found.\")", src.Kind, src.Name, strings.Join(src.Keys(), ", "))
			return nil
		}
		return disc
	}
	return nil
}
