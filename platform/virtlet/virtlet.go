// Package virtlet reads a Virtlet VM pod (a core/v1 Pod, decoded strictly
// with k8s.io/api's types) and gives the guest what Virtlet's cloud-init
// generator (pkg/libvirttools/cloudinit.go, the project's last release) gave
// it, minus its bugs:
//
//   - meta-data instance-id <pod>.<namespace> and local-hostname <pod>;
//     VirtletCloudInitMetaData overrides them (instance-id and
//     local-hostname become spec.instanceID and spec.hostname, other keys
//     spec.cloudInit.metaData);
//   - VirtletSSHKeySource (configmap/NAME or secret/NAME, optional /KEY,
//     default key authorized_keys) and VirtletSSHKeys, one key per line,
//     source first; VirtletCloudInitUserDataOverwrite drops the source's
//     keys when VirtletSSHKeys is given, as Virtlet does. They are the
//     ConfigDrive's public_keys, which cloud-init reads, where Virtlet wrote
//     public-keys, which it ignores under openstack/latest;
//   - user data: VirtletCloudInitUserDataSource's keys (each value read as
//     YAML, as Virtlet does) merged with VirtletCloudInitUserData by
//     Virtlet's rules (maps recursively, lists appended, scalars replaced;
//     Overwrite takes the annotation's map alone), carried as a
//     #cloud-config whose merge_how reproduces those rules against the
//     generated part;
//   - the whole user data: VirtletCloudInitUserDataScript, or the raw text
//     of the data source's key named by VirtletCloudInitUserDataSourceKey
//     (decoded with VirtletCloudInitUserDataSourceEncoding; a #! script
//     keeps its first line, which Virtlet's YAML reading turned into a
//     comment), with @virtlet-mount-script@ replaced by the mount
//     commands. A script is written as the whole user-data file, byte for
//     byte, as Virtlet wrote it (spec.cloudInit.userDataOnly): it is for
//     guests such as CirrOS that run a #! user-data and read neither MIME
//     nor #cloud-config, so the env file, the mounted ConfigMaps and
//     Secrets and the mount units cannot join it and are left out with a
//     warning, as Virtlet left them out; the host name, instance-id and
//     SSH keys are meta-data. A whole #cloud-config is merged with those
//     instead (a cloud-init guest reads both);
//   - the container's env: /etc/cloud/environment, one KEY=value line each,
//     values shell-quoted (Virtlet wrote them raw, so a value with a space
//     or quote broke whoever sourced the file);
//   - ConfigMap and Secret volume mounts: their keys as files under the
//     mount path, with the volume's modes; VirtletFilesFromDataSource's
//     files too (Virtlet injected them into the image; cloud-init writes
//     them here);
//   - Virtlet flexvolumes: mounted at their mount paths (qcow2 volumes on
//     their first partition), as systemd mount units with nofail, on the
//     device names of Virtlet's documentation (virtio disks after the
//     config drive: vdc, vdd, …); one without a type is refused, as
//     Virtlet refuses it, and another driver's flexvolume is ignored with
//     a note like an emptyDir (to Virtlet both are node directories);
//   - VirtletCloudInitImageType: the datasource; VirtletForceDHCPNetworkConfig:
//     no network configuration. Without it Virtlet described the pod's CNI
//     result, which exists only once the pod runs; vminit leaves the
//     network to DHCP then too, and says so (not for a persistent root
//     volume, for which Virtlet, too, writes none);
//   - the annotations that shape the libvirt domain, not first boot
//     (VirtletVCPUCount, VirtletDiskDriver, VirtletCPUModel,
//     VirtletLibvirtCPUSetting, VirtletRootVolumeSize,
//     VirtletChown9pfsMounts, VirtletSystemUUID; domain.go): checked as
//     Virtlet checks them and noted as ignored. VirtletSystemUUID is the
//     SMBIOS UUID only: the instance-id stays <pod>.<namespace>, as in
//     Virtlet's meta-data. Any other Virtlet* annotation is refused (Virtlet
//     ignores it, so a misspelt one would silently do nothing).
//
// Every difference is listed in docs/platforms/virtlet.md.
package virtlet

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/vminit/vminit/cloudinit"
	"github.com/vminit/vminit/internal/lib/yamlbound"
	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// Virtlet's annotations.
const (
	AnnotationImageType         = "VirtletCloudInitImageType"
	AnnotationMetaData          = "VirtletCloudInitMetaData"
	AnnotationUserData          = "VirtletCloudInitUserData"
	AnnotationUserDataOverwrite = "VirtletCloudInitUserDataOverwrite"
	AnnotationUserDataScript    = "VirtletCloudInitUserDataScript"
	AnnotationUserDataSource    = "VirtletCloudInitUserDataSource"
	AnnotationUserDataSourceKey = "VirtletCloudInitUserDataSourceKey"
	AnnotationUserDataEncoding  = "VirtletCloudInitUserDataSourceEncoding"
	AnnotationSSHKeys           = "VirtletSSHKeys"
	AnnotationSSHKeySource      = "VirtletSSHKeySource"
	AnnotationForceDHCP         = "VirtletForceDHCPNetworkConfig"
	AnnotationFilesFromSource   = "VirtletFilesFromDataSource"
	// AnnotationRuntime marks a pod for Virtlet's CRI runtime.
	AnnotationRuntime = "kubernetes.io/target-runtime"
)

// runtimeNames are the AnnotationRuntime values that route a pod to
// Virtlet: "virtlet.cloud" since Virtlet 1.0, "virtlet" before (the CRI
// proxy's name in Virtlet 0.8's documentation and examples).
var runtimeNames = []string{"virtlet.cloud", "virtlet"}

const (
	flexvolumeDriver   = "virtlet/flexvolume_driver"
	envFile            = "/etc/cloud/environment"
	mountScriptFile    = "/etc/cloud/mount-volumes.sh"
	mountScriptMarker  = "@virtlet-mount-script@"
	defaultSSHKeysKey  = "authorized_keys"
	virtletMergeHow    = "dict(no_replace,recurse_array,recurse_str)+list(prepend)+str()"
	firstFlexvolumeDev = 'c' // vda is the image, vdb the config drive
)

// Recognizes reports whether apiVersion and kind are a Pod.
func Recognizes(apiVersion, kind string) bool { return apiVersion == "v1" && kind == "Pod" }

func ann(name string) string { return fmt.Sprintf("metadata.annotations[%q]", name) }

// What the platform does with a refused input, which each refusal says
// (Virtlet's pkg/metadata/types/annotations.go and
// pkg/libvirttools/extdata.go; the kubelet's and the API server's own).
const (
	// virtletRefuses: loadAnnotations fails, and with it CreateContainer
	// (the kubelet retries; the VM never starts).
	virtletRefuses = "Virtlet refuses to start the pod: its CreateContainer fails"
	// kubeletWaits: a pod's ConfigMap, Secret or env reference is missing.
	kubeletWaits = "the kubelet does not start the pod while it is missing"
	// apiRefuses: pod validation.
	apiRefuses = "the API server refuses such a pod"
	// flagSilent: Virtlet's boolean annotations are == "true".
	flagSilent = `Virtlet reads anything but "true" as false, silently`
)

// withBehaviour adds what the platform does to a reference error,
// keeping it matchable (errors.Is ErrNotFound, ErrMissingKey).
func withBehaviour(err error, what string) error { return fmt.Errorf("%w (%s)", err, what) }

// Convert converts a Virtlet VM pod.
func Convert(ctx context.Context, doc *platform.Document, opts platform.Options) (*platform.Result, error) {
	var pod corev1.Pod
	if err := doc.Decode(&pod); err != nil {
		return nil, decodeError(err)
	}
	if pod.Name == "" {
		return nil, spec.Errors{doc.Error("metadata.name", "required: "+apiRefuses)}
	}
	ns := opts.NamespaceOf(pod.Namespace)
	a := pod.Annotations
	b := platform.NewBuilder(doc, pod.Name)
	s := &b.Instance.Spec
	if !slices.Contains(runtimeNames, a[AnnotationRuntime]) {
		b.Warnf(ann(AnnotationRuntime), "is not \"virtlet.cloud\" (or \"virtlet\", before Virtlet 1.0): read as a Virtlet VM pod all the same")
	}
	c := &conv{ctx: ctx, b: b, ns: ns, opts: opts, pod: &pod}
	c.annotations()

	switch t := strings.ToLower(a[AnnotationImageType]); t {
	case "", "nocloud":
		s.Datasource = spec.DatasourceNoCloud
	case "configdrive":
		s.Datasource = spec.DatasourceConfigDrive
	default:
		b.Errorf(ann(AnnotationImageType), "%q: want nocloud or configdrive (%s)", a[AnnotationImageType], virtletRefuses)
	}
	s.Hostname = pod.Name
	b.From("spec.hostname", "metadata.name")
	b.From("metadata.name", "metadata.name")
	s.InstanceID = pod.Name + "." + ns
	c.metaData()
	c.sshKeys()
	overwrite := c.flag(AnnotationUserDataOverwrite)
	c.flag(AnnotationForceDHCP)
	if a[AnnotationForceDHCP] != "true" && !persistentRoot(&pod) {
		b.Warnf("metadata.annotations", "no network configuration: Virtlet described the pod's CNI result, known only once the pod runs; the guest uses DHCP, as with %s: \"true\"", AnnotationForceDHCP)
	}

	ct := c.container()
	whole, wholeOK := c.wholeUserData()
	// A whole user data that is no #cloud-config is all the guest gets,
	// as in Virtlet: nothing generated can join it without MIME, which
	// the simple guests it is for (CirrOS) do not read.
	c.only = wholeOK && cloudinit.PartType([]byte(whole)) != cloudinit.TypeCloudConfig
	mountLines := c.volumes(ct)
	c.env(ct)
	c.filesFromSource()
	if wholeOK {
		c.setWholeUserData(whole, mountLines)
	} else {
		c.userData(overwrite, mountLines)
	}
	return b.Finish(fmt.Sprintf("Virtlet Pod %s/%s", ns, pod.Name))
}

// decodeError says, of each problem strict decoding finds in a pod (an
// unknown or duplicated field, a value of the wrong type), that the API
// server refuses it too: kubectl's default strict field validation.
func decodeError(err error) error {
	for _, e := range spec.AsErrors(err) {
		if e.Message == "unknown field" || e.Message == "given twice" || strings.HasPrefix(e.Message, "want ") || strings.HasPrefix(e.Message, "wrong type") {
			e.Message += " (" + apiRefuses + ": kubectl's strict field validation)"
		}
	}
	return err
}

// known are the annotations vminit reads for the guest's first boot.
var known = []string{AnnotationImageType, AnnotationMetaData, AnnotationUserData, AnnotationUserDataOverwrite,
	AnnotationUserDataScript, AnnotationUserDataSource, AnnotationUserDataSourceKey, AnnotationUserDataEncoding,
	AnnotationSSHKeys, AnnotationSSHKeySource, AnnotationForceDHCP, AnnotationFilesFromSource}

// annotations checks the pod's Virtlet* annotations in name order, so that
// the problems come out in the same order on every run: the domain's are
// checked and noted as ignored, an unknown one is refused (Virtlet itself
// ignores it, so a misspelt annotation would silently do nothing).
func (c *conv) annotations() {
	names := slices.Sorted(maps.Keys(c.pod.Annotations))
	for _, k := range names {
		if !strings.HasPrefix(k, "Virtlet") || slices.Contains(known, k) {
			continue
		}
		if d, ok := domainAnnotation(k); ok {
			c.domainSetting(d)
			continue
		}
		c.b.Errorf(ann(k), "not an annotation Virtlet knows (Virtlet ignores it; vminit reads %s; and notes %s as ignored)",
			strings.Join(known, ", "), strings.Join(domainNames(), ", "))
	}
}

type conv struct {
	ctx  context.Context
	b    *platform.Builder
	ns   string
	opts platform.Options
	pod  *corev1.Pod
	// only: the user data is a script given whole, so files and mounts
	// cannot be added to it; dropped lists the fields that asked for them.
	only    bool
	dropped []string
}

// persistentRoot reports whether the VM boots from a persistent root
// volume (a volume device at "/"): Virtlet writes no network
// configuration for it, as some cloud-init versions apply one only once.
func persistentRoot(pod *corev1.Pod) bool {
	if len(pod.Spec.Containers) == 0 {
		return false
	}
	return slices.ContainsFunc(pod.Spec.Containers[0].VolumeDevices, func(d corev1.VolumeDevice) bool { return d.DevicePath == "/" })
}

func (c *conv) flag(name string) bool {
	switch v := c.pod.Annotations[name]; v {
	case "", "false":
		return false
	case "true":
		return true
	default:
		c.b.Errorf(ann(name), "%q: want \"true\" or \"false\" (%s)", v, flagSilent)
		return false
	}
}

// yamlMap reads an annotation holding a YAML mapping.
func (c *conv) yamlMap(name string) map[string]any {
	text, ok := c.pod.Annotations[name]
	if !ok {
		return nil
	}
	var m map[string]any
	if err := yamlbound.Unmarshal([]byte(text), &m, spec.FieldYAML); err != nil {
		c.b.Errorf(ann(name), "%s (%s)", yamlbound.Describe(err, "not a YAML mapping"), virtletRefuses)
		return nil
	}
	return m
}

func (c *conv) metaData() {
	md := c.yamlMap(AnnotationMetaData)
	s := &c.b.Instance.Spec
	p := ann(AnnotationMetaData)
	for _, k := range sortedKeys(md) {
		v := md[k]
		switch k {
		case "instance-id", "uuid":
			id, ok := v.(string)
			if !ok {
				c.b.Errorf(p, "%s: want a string", k)
				continue
			}
			s.InstanceID = id
			c.b.From("spec.instanceID", p)
		case "local-hostname", "hostname":
			h, ok := v.(string)
			if !ok {
				c.b.Errorf(p, "%s: want a string", k)
				continue
			}
			if host, _, isFQDN := strings.Cut(h, "."); isFQDN {
				s.Hostname, s.FQDN = host, h
				c.b.From("spec.fqdn", p)
			} else {
				s.Hostname = h
			}
			c.b.From("spec.hostname", p)
		case "public-keys", "public_keys":
			c.b.Errorf(p, "%s: give SSH keys with %s or %s (Virtlet writes this meta-data key over theirs)", k, AnnotationSSHKeys, AnnotationSSHKeySource)
		default:
			if s.CloudInit.MetaData == nil {
				s.CloudInit.MetaData = map[string]any{}
			}
			s.CloudInit.MetaData[k] = v
			c.b.From("spec.cloudInit.metaData."+k, p)
		}
	}
}

// source reads a kind/name[/key] reference annotation.
func (c *conv) source(name string, allowKey bool) (*platform.Source, string, bool) {
	v := c.pod.Annotations[name]
	parts := strings.Split(v, "/")
	if len(parts) < 2 || (len(parts) > 2 && !allowKey) || len(parts) > 3 || parts[1] == "" {
		form := "configmap/NAME or secret/NAME"
		if allowKey {
			form = "configmap/NAME[/KEY] or secret/NAME[/KEY]"
		}
		c.b.Errorf(ann(name), "%q: want %s (%s)", v, form, virtletRefuses)
		return nil, "", false
	}
	kind := strings.ToLower(parts[0])
	if kind != "configmap" && kind != "secret" {
		c.b.Errorf(ann(name), "%q: the kind is configmap or secret, not %q (%s)", v, parts[0], virtletRefuses)
		return nil, "", false
	}
	src, err := platform.Fetch(c.ctx, c.opts.Resolver, kind, c.ns, parts[1])
	if err != nil {
		c.b.Err(ann(name), withBehaviour(err, virtletRefuses))
		return nil, "", false
	}
	key := ""
	if len(parts) == 3 {
		key = parts[2]
	}
	return src, key, true
}

func splitKeys(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func (c *conv) sshKeys() {
	a := c.pod.Annotations
	s := &c.b.Instance.Spec
	_, hasKeys := a[AnnotationSSHKeys]
	if _, ok := a[AnnotationSSHKeySource]; ok && !(hasKeys && a[AnnotationUserDataOverwrite] == "true") {
		if src, key, ok := c.source(AnnotationSSHKeySource, true); ok {
			if key == "" {
				key = defaultSSHKeysKey
			}
			if _, data, err := src.Key(key); err != nil {
				c.b.Err(ann(AnnotationSSHKeySource), withBehaviour(err, "Virtlet reads a missing key as empty: the VM gets no SSH key, silently"))
			} else {
				for _, k := range splitKeys(string(data)) {
					c.b.From(fmt.Sprintf("spec.sshAuthorizedKeys[%d]", len(s.SSHAuthorizedKeys)), ann(AnnotationSSHKeySource))
					s.SSHAuthorizedKeys = append(s.SSHAuthorizedKeys, k)
				}
			}
		}
	}
	for _, k := range splitKeys(a[AnnotationSSHKeys]) {
		c.b.From(fmt.Sprintf("spec.sshAuthorizedKeys[%d]", len(s.SSHAuthorizedKeys)), ann(AnnotationSSHKeys))
		s.SSHAuthorizedKeys = append(s.SSHAuthorizedKeys, k)
	}
}

// container is the VM's container: Virtlet runs one per pod.
func (c *conv) container() *corev1.Container {
	if len(c.pod.Spec.Containers) == 0 {
		c.b.Errorf("spec.containers", "required: the VM's container (%s)", apiRefuses)
		return nil
	}
	if len(c.pod.Spec.Containers) > 1 {
		c.b.Warnf("spec.containers[1]", "ignored: Virtlet runs one VM per pod, from the first container")
	}
	return &c.pod.Spec.Containers[0]
}

func (c *conv) env(ct *corev1.Container) {
	if ct == nil || len(ct.Env) == 0 {
		return
	}
	var sb strings.Builder
	for i, e := range ct.Env {
		p := fmt.Sprintf("spec.containers[0].env[%d]", i)
		v := e.Value
		if e.ValueFrom != nil {
			var err error
			if v, err = c.valueFrom(e.ValueFrom); err != nil {
				c.b.Err(p+".valueFrom", withBehaviour(err, kubeletWaits))
				continue
			}
		}
		if strings.ContainsAny(v, "\n\x00") {
			c.b.Errorf(p, "the value has a newline or NUL, which an environment file cannot hold (Virtlet writes it unquoted: its next line becomes a line of the file of its own)")
			continue
		}
		fmt.Fprintf(&sb, "%s=%s\n", e.Name, quoteEnv(v))
	}
	c.addFile(envFile, 0o644, []byte(sb.String()), "spec.containers[0].env")
}

// quoteEnv quotes a value so that both sh (". file") and systemd's
// EnvironmentFile read it back unchanged.
func quoteEnv(v string) string {
	if v != "" && strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.,:/@+=%", r))
	}) < 0 {
		return v
	}
	return spec.ShellQuote(v)
}

func (c *conv) valueFrom(vf *corev1.EnvVarSource) (string, error) {
	var v []byte
	var err error
	switch {
	case vf.ConfigMapKeyRef != nil:
		v, err = platform.FetchKey(c.ctx, c.opts.Resolver, "configmap", c.ns, vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key)
	case vf.SecretKeyRef != nil:
		v, err = platform.FetchKey(c.ctx, c.opts.Resolver, "secret", c.ns, vf.SecretKeyRef.Name, vf.SecretKeyRef.Key)
	default:
		err = fmt.Errorf("%w: only configMapKeyRef and secretKeyRef are known before the pod runs", platform.ErrUnsupported)
	}
	return string(v), err
}

func (c *conv) addFile(p string, mode uint32, data []byte, from string) {
	if c.only {
		c.drop(from)
		return
	}
	s := &c.b.Instance.Spec
	for _, f := range s.Files {
		if f.Path == p {
			c.b.Errorf(from, "writes %s, which is already written (Virtlet writes both; cloud-init keeps the last)", p)
			return
		}
	}
	m := spec.Mode(mode)
	f := spec.File{Path: p, Mode: &m}
	if isText(data) {
		t := string(data)
		f.Content = &t
	} else {
		f.ContentBase64 = base64.StdEncoding.EncodeToString(data)
	}
	c.b.From(fmt.Sprintf("spec.files[%d]", len(s.Files)), from)
	s.Files = append(s.Files, f)
}

func isText(data []byte) bool {
	for _, r := range string(data) {
		if r == 0xfffd || r < 0x20 && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}

// volumes turns the container's volume mounts into files and mounts, and
// returns the mount script's lines.
func (c *conv) volumes(ct *corev1.Container) []string {
	if ct == nil {
		return nil
	}
	vols := map[string]int{}
	for i, v := range c.pod.Spec.Volumes {
		vols[v.Name] = i
	}
	var lines []string
	flex := 0
	for i, vm := range ct.VolumeMounts {
		p := fmt.Sprintf("spec.containers[0].volumeMounts[%d]", i)
		vi, ok := vols[vm.Name]
		if !ok {
			c.b.Errorf(p+".name", "no volume %q in spec.volumes (%s)", vm.Name, apiRefuses)
			continue
		}
		v := &c.pod.Spec.Volumes[vi]
		vp := fmt.Sprintf("spec.volumes[%d]", vi)
		switch {
		case v.ConfigMap != nil:
			src, err := platform.Fetch(c.ctx, c.opts.Resolver, "configmap", c.ns, v.ConfigMap.Name)
			if err != nil {
				c.b.Err(vp+".configMap.name", withBehaviour(err, kubeletWaits))
				continue
			}
			c.keysAsFiles(src, vm.MountPath, v.ConfigMap.Items, v.ConfigMap.DefaultMode, vp+".configMap")
		case v.Secret != nil:
			src, err := platform.Fetch(c.ctx, c.opts.Resolver, "secret", c.ns, v.Secret.SecretName)
			if err != nil {
				c.b.Err(vp+".secret.secretName", withBehaviour(err, kubeletWaits))
				continue
			}
			c.keysAsFiles(src, vm.MountPath, v.Secret.Items, v.Secret.DefaultMode, vp+".secret")
		case v.FlexVolume != nil && v.FlexVolume.Driver == flexvolumeDriver:
			dev := "/dev/vd" + string(rune(firstFlexvolumeDev+flex))
			flex++
			// Virtlet's ScanFlexVolumes (pkg/libvirttools) assumes no type:
			// "need to specify 'type'".
			switch t := v.FlexVolume.Options["type"]; t {
			case "qcow2":
				dev += "1"
			case "raw", "ceph":
			case "":
				c.b.Errorf(vp+".flexVolume.options.type", "required: Virtlet's flexvolumes are qcow2, raw or ceph, and Virtlet assumes none (%s)", virtletRefuses)
				continue
			default:
				c.b.Errorf(vp+".flexVolume.options.type", "%q: Virtlet's flexvolumes are qcow2, raw or ceph (%s)", t, virtletRefuses)
				continue
			}
			if s := &c.b.Instance.Spec; !c.only {
				c.b.From(fmt.Sprintf("spec.mounts[%d]", len(s.Mounts)), p)
				s.Mounts = append(s.Mounts, spec.Mount{Device: dev, Path: vm.MountPath, Options: []string{"defaults", "nofail"}})
			}
			lines = append(lines, fmt.Sprintf("if ! mountpoint %s; then mkdir -p %s && mount %s %s; fi",
				spec.ShellQuote(vm.MountPath), spec.ShellQuote(vm.MountPath), dev, spec.ShellQuote(vm.MountPath)))
		default:
			// Another driver's flexvolume too: to Virtlet it is a
			// directory on the node (GetFileSystemVolumes shares it over
			// 9p, as an emptyDir or a hostPath).
			c.b.Warnf(p, "ignored: only ConfigMap, Secret and Virtlet flexvolume mounts reach the VM; this volume's content is on the node")
		}
	}
	if len(c.pod.Spec.Containers) > 0 && len(c.pod.Spec.Containers[0].VolumeDevices) > 0 {
		c.b.Warnf("spec.containers[0].volumeDevices", "ignored: Virtlet links raw block volumes at the path the running domain gives them, which vminit cannot know")
	}
	return lines
}

// keysAsFiles writes the keys of a mounted ConfigMap or Secret as files, as
// the kubelet lays them out.
func (c *conv) keysAsFiles(src *platform.Source, dir string, items []corev1.KeyToPath, defaultMode *int32, from string) {
	mode := uint32(0o644)
	if defaultMode != nil {
		mode = uint32(*defaultMode) & 0o7777
	}
	if len(items) == 0 {
		for _, k := range src.Keys() {
			c.addFile(path.Join(dir, k), mode, src.Data[k], from)
		}
		return
	}
	for i, it := range items {
		data, ok := src.Data[it.Key]
		if !ok {
			_, _, err := src.Key(it.Key)
			c.b.Err(fmt.Sprintf("%s.items[%d].key", from, i), withBehaviour(err, kubeletWaits))
			continue
		}
		m := mode
		if it.Mode != nil {
			m = uint32(*it.Mode) & 0o7777
		}
		c.addFile(path.Join(dir, it.Path), m, data, fmt.Sprintf("%s.items[%d]", from, i))
	}
}

// filesFromSource writes VirtletFilesFromDataSource's files: for each key X
// with X_path, X's content (base64 unless X_encoding is plain) at X_path.
func (c *conv) filesFromSource() {
	if _, ok := c.pod.Annotations[AnnotationFilesFromSource]; !ok {
		return
	}
	src, _, ok := c.source(AnnotationFilesFromSource, false)
	if !ok {
		return
	}
	p := ann(AnnotationFilesFromSource)
	for _, k := range src.Keys() {
		if strings.HasSuffix(k, "_path") || strings.HasSuffix(k, "_encoding") {
			continue
		}
		fp, ok := src.Data[k+"_path"]
		if !ok {
			c.b.Errorf(p, "%s %q: key %q has no %q giving its path (%s)", src.Kind, src.Name, k, k+"_path", virtletRefuses)
			continue
		}
		data := src.Data[k]
		switch enc := string(src.Data[k+"_encoding"]); enc {
		case "", "base64":
			d, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
			if err != nil {
				c.b.Errorf(p, "%s %q: key %q is not base64 (set %q to plain for text): %v (%s)", src.Kind, src.Name, k, k+"_encoding", err, virtletRefuses)
				continue
			}
			data = d
		case "plain":
		default:
			c.b.Errorf(p, "%s %q: %s is %q; want base64 or plain (%s)", src.Kind, src.Name, k+"_encoding", enc, virtletRefuses)
			continue
		}
		c.addFile(path.Clean("/"+string(fp)), 0o644, data, p)
	}
}

// wholeUserData returns the user data given whole: the text of
// VirtletCloudInitUserDataScript, or of the data source's key named by
// VirtletCloudInitUserDataSourceKey (decoded with
// VirtletCloudInitUserDataSourceEncoding), which Virtlet took as the
// script. ok is false when neither is given (or it could not be read).
func (c *conv) wholeUserData() (string, bool) {
	a := c.pod.Annotations
	if script, ok := a[AnnotationUserDataScript]; ok {
		for _, other := range []string{AnnotationUserDataSourceKey, AnnotationUserData} {
			if _, ok := a[other]; ok {
				c.b.Warnf(ann(other), "ignored: %s is the whole user data, as in Virtlet", AnnotationUserDataScript)
			}
		}
		return script, true
	}
	key, ok := a[AnnotationUserDataSourceKey]
	if !ok {
		return "", false
	}
	if _, ok := a[AnnotationUserDataSource]; !ok {
		c.b.Errorf(ann(AnnotationUserDataSourceKey), "needs %s (%s)", AnnotationUserDataSource, virtletRefuses)
		return "", false
	}
	if _, ok := a[AnnotationUserData]; ok {
		c.b.Warnf(ann(AnnotationUserData), "ignored: %s takes the whole user data from the data source, as in Virtlet", AnnotationUserDataSourceKey)
	}
	src, _, ok := c.source(AnnotationUserDataSource, false)
	if !ok {
		return "", false
	}
	data, ok := src.Data[key]
	if !ok {
		_, _, err := src.Key(key)
		c.b.Err(ann(AnnotationUserDataSourceKey), withBehaviour(err, virtletRefuses))
		return "", false
	}
	switch enc := a[AnnotationUserDataEncoding]; enc {
	case "", "plain":
	case "base64":
		d, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
		if err != nil {
			c.b.Errorf(ann(AnnotationUserDataSourceKey), "key %q is not base64 (%s: base64): %v (%s)", key, AnnotationUserDataEncoding, err, virtletRefuses)
			return "", false
		}
		data = d
	default:
		c.b.Errorf(ann(AnnotationUserDataEncoding), "%q: want plain or base64 (%s)", enc, virtletRefuses)
		return "", false
	}
	return string(data), true
}

// setWholeUserData makes text the user data, with @virtlet-mount-script@
// replaced by the mount commands. A #cloud-config is merged with what the
// spec generates (files, mounts) by cloud-init's rules; anything else (a
// script) is the whole user-data file, as Virtlet wrote it.
func (c *conv) setWholeUserData(text string, mountLines []string) {
	a := c.pod.Annotations
	from := ann(AnnotationUserDataScript)
	if _, ok := a[AnnotationUserDataScript]; !ok {
		from = ann(AnnotationUserDataSourceKey)
	}
	script := mountScript(mountLines)
	if strings.Contains(text, mountScriptMarker) {
		text = strings.ReplaceAll(text, mountScriptMarker, script)
	} else if script != "" && !c.only {
		c.addFile(mountScriptFile, 0o755, []byte(script), "spec.containers[0].volumeMounts")
	} else if script != "" {
		c.b.Warnf(from, "has no %s: the flexvolumes are not mounted (put the marker where the mount commands should run)", mountScriptMarker)
	}
	s := &c.b.Instance.Spec
	s.CloudInit.UserData = text
	s.CloudInit.UserDataOnly = c.only
	c.b.From("spec.cloudInit.userData", from)
	if len(c.dropped) > 0 {
		c.b.Warnf(from, "the user data is this script alone, as in Virtlet: a guest without #cloud-config and MIME support (CirrOS) runs it as is, so nothing generated joins it and %s are not written to the guest", strings.Join(c.dropped, ", "))
	}
}

// drop records that the field from asked for something the whole user
// data leaves out.
func (c *conv) drop(from string) {
	if !slices.Contains(c.dropped, from) {
		c.dropped = append(c.dropped, from)
	}
}

func mountScript(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return "#!/bin/sh\n" + strings.Join(lines, "\n") + "\n"
}

// userData builds the user data from the data source's keys and
// VirtletCloudInitUserData, and the mount script.
func (c *conv) userData(overwrite bool, mountLines []string) {
	a := c.pod.Annotations
	s := &c.b.Instance.Spec
	if script := mountScript(mountLines); script != "" {
		c.addFile(mountScriptFile, 0o755, []byte(script), "spec.containers[0].volumeMounts")
	}
	var base map[string]any
	if _, ok := a[AnnotationUserDataSource]; ok {
		if src, _, ok := c.source(AnnotationUserDataSource, false); ok {
			base = map[string]any{}
			for _, k := range src.Keys() {
				var v any
				if err := yamlbound.Unmarshal(src.Data[k], &v, spec.FieldYAML); err != nil {
					c.b.Errorf(ann(AnnotationUserDataSource), "%s %q: key %q %s", src.Kind, src.Name, k, yamlbound.Describe(err, fmt.Sprintf("is not YAML, so it cannot be a user-data key (Virtlet dropped it silently; to give a script, name its key with %s)", AnnotationUserDataSourceKey)))
					continue
				}
				base[k] = v
			}
		}
	}
	if enc, ok := a[AnnotationUserDataEncoding]; ok {
		c.b.Warnf(ann(AnnotationUserDataEncoding), "%q has no effect without %s", enc, AnnotationUserDataSourceKey)
	}
	over := c.yamlMap(AnnotationUserData)
	merged := base
	switch {
	case overwrite && over != nil:
		merged = over
	case over != nil:
		merged = mergeVirtlet(base, over)
	}
	if len(merged) == 0 {
		return
	}
	merged["merge_how"] = virtletMergeHow
	doc, err := yaml.Marshal(merged)
	if err != nil {
		c.b.Errorf(ann(AnnotationUserData), "%v", err)
		return
	}
	s.CloudInit.UserData = "#cloud-config\n" + string(doc)
	c.b.From("spec.cloudInit.userData", ann(AnnotationUserData))
}

// mergeVirtlet is Virtlet's utils.Merge: maps recursively, lists
// appended (base first), anything else replaced by over.
func mergeVirtlet(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = mergeValue(out[k], v)
	}
	return out
}

func mergeValue(base, over any) any {
	switch o := over.(type) {
	case map[string]any:
		if b, ok := base.(map[string]any); ok {
			return mergeVirtlet(b, o)
		}
	case []any:
		if b, ok := base.([]any); ok {
			return append(slices.Clone(b), o...)
		}
	}
	return over
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
