package convert_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
)

// TestRefusalsNameObjectFieldLine reads real published objects
// (platform/testdata/corpus), some with one edit (edit replaces old with
// new, saying what a user might get wrong), as `vminit build FILE` does,
// and wants each refusal to name the file's line, the field path, what the
// platform itself does with that input, and the object.
func TestRefusalsNameObjectFieldLine(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		edit       [2]string // old, new: a minimal edit of the object
		wrap       string    // a v1 List holding the object: its head
		opts       platform.Options
		want       []string
	}{
		{name: "Virtlet: the Secret and ConfigMaps the pod names are not given", file: "virtlet/virtlet-docs-reference-cloud-init-L23.yaml",
			want: []string{
				`virtlet-docs-reference-cloud-init-L23.yaml:53: metadata.annotations["VirtletSSHKeySource"]: secret "mysecret" not found in namespace "default" (Virtlet refuses to start the pod: its CreateContainer fails) (in Pod/ubuntu-vm)`,
				`virtlet-docs-reference-cloud-init-L23.yaml:95: spec.volumes[0].configMap.name: configmap "someconfig" not found in namespace "default" (the kubelet does not start the pod while it is missing) (in Pod/ubuntu-vm)`,
				`virtlet-docs-reference-cloud-init-L23.yaml:35: metadata.annotations["VirtletCloudInitUserDataSource"]: configmap "vm-user-data" not found in namespace "default" (Virtlet refuses to start the pod: its CreateContainer fails) (in Pod/ubuntu-vm)`,
			}},
		{name: "Virtlet: a design proposal's sketch, not YAML", file: "virtlet/virtlet-docs-design-proposals-fast-persistent-rootfs-L45.yaml",
			want: []string{`virtlet-docs-design-proposals-fast-persistent-rootfs-L45.yaml:13: not valid YAML: mapping values are not allowed in this context (kubectl cannot read the file either) (in Pod/persistent-vm)`}},
		{name: "Virtlet: a pod without containers", file: "virtlet/virtlet-docs-reference-volumes-L206.yaml",
			want: []string{`virtlet-docs-reference-volumes-L206.yaml:2: spec.containers: required: the VM's container (the API server refuses such a pod) (in Pod/cirros-vm)`}},
		{name: "Virtlet: a Deployment's pod template with a disk driver Virtlet refuses", file: "virtlet/virtlet-cirros-vm-deployment.yaml",
			edit: [2]string{"VirtletDiskDriver: virtio", "VirtletDiskDriver: ide"},
			want: []string{`virtlet-cirros-vm-deployment.yaml:18: spec.template.metadata.annotations["VirtletDiskDriver"]: "ide": want "virtio" or "scsi" (Virtlet refuses to start the pod: its CreateContainer fails) (in Deployment/cirros-deployment)`}},
		{name: "Virtlet: a boolean annotation Virtlet reads as false", file: "virtlet/virtlet-debian-vm.yaml",
			edit: [2]string{`VirtletForceDHCPNetworkConfig: "true"`, `VirtletForceDHCPNetworkConfig: "yes"`},
			want: []string{`metadata.annotations["VirtletForceDHCPNetworkConfig"]: "yes": want "true" or "false" (Virtlet reads anything but "true" as false, silently) (in Pod/debian-vm)`}},
		{name: "Virtlet: a pod in a v1 List, its image type unknown", file: "virtlet/virtlet-cirros-vm.yaml", wrap: "apiVersion: v1\nkind: List\nitems:\n",
			edit: [2]string{"VirtletDiskDriver: virtio", "VirtletCloudInitImageType: iso"},
			want: []string{`virtlet-cirros-vm.yaml:12: items[0].metadata.annotations["VirtletCloudInitImageType"]: "iso": want nocloud or configdrive (Virtlet refuses to start the pod: its CreateContainer fails) (in Pod/cirros-vm)`}},
		{name: "Virtlet: a misspelt field of the pod", file: "virtlet/virtlet-ubuntu-vm.yaml",
			edit: [2]string{"imagePullPolicy:", "imagePulPolicy:"},
			want: []string{"spec.containers[0].imagePulPolicy: unknown field (the API server refuses such a pod: kubectl's strict field validation) (in Pod/ubuntu-vm)"}},
		{name: "Virtlet: SSH keys in the meta-data annotation", file: "virtlet/virtlet-ubuntu-vm.yaml",
			edit: [2]string{"    VirtletSSHKeys: |", "    VirtletCloudInitMetaData: |\n      public-keys: [x]\n    VirtletSSHKeys: |"},
			want: []string{`metadata.annotations["VirtletCloudInitMetaData"]: public-keys: give SSH keys with VirtletSSHKeys or VirtletSSHKeySource (Virtlet writes this meta-data key over theirs) (in Pod/ubuntu-vm)`}},
		{name: "oVirt: the API documentation's body, not well-formed", file: "ovirt/api-model-start-cloud-init.xml",
			want: []string{`api-model-start-cloud-init.xml:13: not well-formed XML: element <gateway> closed by </netmask>; the engine answers 400 Bad Request (in action)`}},
		{name: "oVirt: sysprep", file: "ovirt/ansible-ovirt-vm-sysprep.xml",
			want: []string{`ansible-ovirt-vm-sysprep.xml:2: action.use_sysprep: true: the engine writes a Windows sysprep answer file: without a custom_script the engine fills its own answer-file template (osinfo sysprepPath), which vminit does not have; give the answer file as initialization.custom_script to have it read and passed through (in action)`}},
		{name: "oVirt: a plain-text root password", file: "ovirt/go-start-vm-with-cloudinit.xml",
			want: []string{`go-start-vm-with-cloudinit.xml:27: action.vm.initialization.root_password: a plain-text password: vminit never writes one to the seed (oVirt does)`, "pass --password-salt SALT", "(in action)"}},
		{name: "oVirt: a custom script that is no YAML", file: "ovirt/py-start-vm-with-cloud-init.xml", opts: platform.Options{PasswordSalt: "salt"},
			edit: [2]string{"permissions: '0644'", "permissions: [0644"},
			want: []string{"py-start-vm-with-cloud-init.xml:5: action.vm.initialization.custom_script: ", "(oVirt appends the script to the YAML it writes, which cloud-init then cannot read: the guest gets none of it) (in action)"}},
		{name: "oVirt: a NIC that does not start on boot", file: "ovirt/py-start-vm-with-cloud-init.xml", opts: platform.Options{PasswordSalt: "salt"},
			edit: [2]string{"<on_boot>true</on_boot>", "<on_boot>false</on_boot>"},
			want: []string{"py-start-vm-with-cloud-init.xml:25: action.vm.initialization.nic_configurations.nic_configuration[0].on_boot: false: oVirt refuses cloud-init network settings that do not start on boot (the engine does not run the VM: 'Start on boot' must be true) (in action)"}},
		{name: "oVirt: a netmask that is none", file: "ovirt/py-start-vm-with-cloud-init.xml", opts: platform.Options{PasswordSalt: "salt"},
			edit: [2]string{"<netmask>255.255.255.0</netmask>", "<netmask>255.0.255.0</netmask>"},
			want: []string{`py-start-vm-with-cloud-init.xml:21: action.vm.initialization.nic_configurations.nic_configuration[0].ip.netmask: "255.0.255.0" is not a netmask`, "(oVirt writes it into network_data.json as given, which cloud-init cannot read) (in action)"}},
		{name: "clusterctl: a cluster template as published, its ${VARIABLES} not substituted", file: "capi/capz-cluster-template.yaml",
			want: []string{
				`capz-cluster-template.yaml:47: metadata.name: "${CLUSTER_NAME}-control-plane" holds the template variable ${CLUSTER_NAME}, not substituted: a cluster template is published with ${VARIABLES} that clusterctl substitutes (clusterctl generate cluster NAME --from FILE, or envsubst < FILE) before the API server sees it`,
				`capz-cluster-template.yaml:177: metadata.name: "${CLUSTER_NAME}-md-0" holds the template variable ${CLUSTER_NAME}`,
				`(in KubeadmConfigTemplate/${CLUSTER_NAME}-md-0)`}},
		{name: "kubectl: a name the API server refuses", file: "kubevirt/kubevirt-v0.20.0-vm-cirros.yaml",
			edit: [2]string{"name: vm-cirros", "name: VM_cirros"},
			want: []string{`kubevirt-v0.20.0-vm-cirros.yaml:8: metadata.name: "VM_cirros": the API server refuses the name (a lowercase RFC 1123 subdomain must consist of`, "vminit names the guest after it", "(in VirtualMachine/VM_cirros)"}},
		{name: "kubectl: an object without apiVersion", file: "kubevirt/ug-host-devices-L143.yaml",
			want: []string{`ug-host-devices-L143.yaml:2: apiVersion: required: kind VirtualMachineInstance without an apiVersion is no object kubectl would apply`, `(in VirtualMachineInstance/vmi-nvme)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			text := string(data)
			if tc.edit[0] != "" {
				if !strings.Contains(text, tc.edit[0]) {
					t.Fatalf("%s has no %q to edit", tc.file, tc.edit[0])
				}
				text = strings.Replace(text, tc.edit[0], tc.edit[1], 1)
			}
			if tc.wrap != "" {
				// The object as the List's item, its lines kept apart from the
				// List's head (the comment line's place).
				_, body, _ := strings.Cut(text, "\n")
				text = tc.wrap + "- " + strings.ReplaceAll(strings.TrimSuffix(body, "\n"), "\n", "\n  ") + "\n"
			}
			_, err = convert.Read(t.Context(), filepath.Base(tc.file), []byte(text), tc.opts)
			if err == nil {
				t.Fatal("built; want a refusal")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks\n\t%s\ngot\n\t%s", w, strings.ReplaceAll(err.Error(), "\n", "\n\t"))
				}
			}
		})
	}
}
