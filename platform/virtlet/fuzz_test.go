package virtlet_test

import (
	"context"
	"errors"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/platform/convert"
	"github.com/vminit/vminit/spec"
)

// FuzzAnnotations converts a pod whose Virtlet annotations hold arbitrary
// text (beside a ConfigMap and a Secret they may name): the conversion
// must not panic, its problems must be field errors, and a pod it accepts
// must give a spec that loads back the same and converts the same twice.
func FuzzAnnotations(f *testing.F) {
	f.Add("configdrive", "instance-id: a\nlocal-hostname: b.example.com\n", "runcmd: [a]\n", "configmap/ud", "", "", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a@b\n", "secret/keys/k", "true")
	f.Add("", "", "", "secret/keys", "k", "#!/bin/sh\n@virtlet-mount-script@\n", "", "", "")
	f.Add("NoCloud", "{a: [1, {b: c}]}", "write_files: [{path: /x, content: y}]\nusers: [default]\n", "configmap/ud", "script", "", "", "configmap/ud", "false")
	f.Fuzz(func(t *testing.T, imageType, metaData, userData, source, sourceKey, script, sshKeys, sshKeySource, overwrite string) {
		anns := map[string]string{"kubernetes.io/target-runtime": "virtlet.cloud", "VirtletForceDHCPNetworkConfig": "true"}
		for k, v := range map[string]string{
			"VirtletCloudInitImageType": imageType, "VirtletCloudInitMetaData": metaData, "VirtletCloudInitUserData": userData,
			"VirtletCloudInitUserDataSource": source, "VirtletCloudInitUserDataSourceKey": sourceKey,
			"VirtletCloudInitUserDataScript": script, "VirtletSSHKeys": sshKeys, "VirtletSSHKeySource": sshKeySource,
			"VirtletCloudInitUserDataOverwrite": overwrite,
		} {
			if v != "" {
				anns[k] = v
			}
		}
		pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "vm", "namespace": "ns", "annotations": anns},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "vm", "image": "virtlet.cloud/x",
				"env":          []any{map[string]any{"name": "E", "value": userData}},
				"volumeMounts": []any{map[string]any{"name": "f", "mountPath": "/data"}}}},
				"volumes": []any{map[string]any{"name": "f", "flexVolume": map[string]any{"driver": "virtlet/flexvolume_driver"}}}}}
		doc, err := yaml.Marshal(pod)
		if err != nil {
			return
		}
		doc = append(doc, "---\n"+object("ConfigMap", "ud", "runcmd", "- a\n", "script", "#!/bin/sh\n")+"---\n"+object("Secret", "keys", "k", "#!/bin/sh\n")...)
		conv := func() (*platform.Result, error) {
			rs, err := convert.Read(context.Background(), "pod.yaml", doc, platform.Options{})
			if err != nil {
				return nil, err
			}
			return rs[0], nil
		}
		r, err := conv()
		if err != nil {
			if spec.AsErrors(err) == nil && !errors.Is(err, platform.ErrUnsupported) {
				t.Fatalf("not field errors: %v", err)
			}
			return
		}
		if _, err := spec.Parse(r.Spec, "."); err != nil {
			t.Fatalf("the spec does not load back: %v\n%s", err, r.Spec)
		}
		if r2, err := conv(); err != nil || string(r2.Spec) != string(r.Spec) {
			t.Fatalf("a second conversion differs: %v", err)
		}
	})
}
