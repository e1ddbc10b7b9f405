package capi

import (
	"encoding/json"
	"fmt"

	//lint:ignore SA1019 v1beta1 KubeadmConfigs are what many users still have; reading them is the point.
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	//lint:ignore SA1019 v1beta1 KubeadmControlPlanes are what many published templates still are.
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"

	"github.com/vminit/vminit/platform"
	"github.com/vminit/vminit/spec"
)

// The API groups and versions of the objects this package reads: every
// version Cluster API serves.
const (
	bootstrapV1beta2    = "bootstrap.cluster.x-k8s.io/v1beta2"
	bootstrapV1beta1    = "bootstrap.cluster.x-k8s.io/v1beta1"
	controlPlaneV1beta2 = "controlplane.cluster.x-k8s.io/v1beta2"
	controlPlaneV1beta1 = "controlplane.cluster.x-k8s.io/v1beta1"
)

// Recognizes reports whether apiVersion and kind are an object this
// package reads.
func Recognizes(apiVersion, kind string) bool {
	switch apiVersion {
	case bootstrapV1beta2, bootstrapV1beta1:
		return kind == "KubeadmConfig" || kind == "KubeadmConfigTemplate"
	case controlPlaneV1beta2, controlPlaneV1beta1:
		return kind == "KubeadmControlPlane" || kind == "KubeadmControlPlaneTemplate"
	}
	return false
}

// role is whose machines an object bootstraps, which decides, as CABPK
// and KCP decide, whether a machine inits the cluster or joins it
// (join.go).
type role int

const (
	// roleMachine: a KubeadmConfig, one Machine's (or a MachinePool's).
	roleMachine role = iota
	// roleWorkers: a KubeadmConfigTemplate, the machines of a
	// MachineDeployment or MachinePool.
	roleWorkers
	// roleControlPlane: a KubeadmControlPlane(Template), the control
	// plane's machines.
	roleControlPlane
)

// source is a bootstrap object read: the KubeadmConfig spec it holds, and
// where.
type source struct {
	spec     bootstrapv1.KubeadmConfigSpec
	name, ns string
	path     string // of the KubeadmConfig spec in the object
	role     role
	// version and replicas are a KubeadmControlPlane's spec.version and
	// spec.replicas (its machines' Kubernetes version and count).
	version  string
	replicas *int32
	// clusterLabel is the object's label cluster.x-k8s.io/cluster-name:
	// its Cluster, where no Machine names one.
	clusterLabel string
}

// read decodes doc, strictly, with Cluster API's own types; v1beta1 is
// converted by Cluster API's own conversion.
func read(doc *platform.Document) (*source, error) {
	s := &source{}
	var old *bootstrapv1beta1.KubeadmConfigSpec // a v1beta1 spec to convert
	var err error
	switch doc.APIVersion + " " + doc.Kind {
	case bootstrapV1beta2 + " KubeadmConfig":
		var c bootstrapv1.KubeadmConfig
		err = doc.Decode(&c)
		s.spec, s.name, s.ns, s.path = c.Spec, c.Name, c.Namespace, "spec"
	case bootstrapV1beta1 + " KubeadmConfig":
		var c bootstrapv1beta1.KubeadmConfig
		err = doc.Decode(&c)
		old, s.name, s.ns, s.path = &c.Spec, c.Name, c.Namespace, "spec"
	case bootstrapV1beta2 + " KubeadmConfigTemplate":
		var c bootstrapv1.KubeadmConfigTemplate
		err = doc.Decode(&c)
		s.spec, s.name, s.ns, s.path = c.Spec.Template.Spec, c.Name, c.Namespace, "spec.template.spec"
		s.role = roleWorkers
	case bootstrapV1beta1 + " KubeadmConfigTemplate":
		var c bootstrapv1beta1.KubeadmConfigTemplate
		err = doc.Decode(&c)
		old, s.name, s.ns, s.path = &c.Spec.Template.Spec, c.Name, c.Namespace, "spec.template.spec"
		s.role = roleWorkers
	case controlPlaneV1beta2 + " KubeadmControlPlane":
		var c controlplanev1.KubeadmControlPlane
		err = doc.Decode(&c)
		s.spec, s.name, s.ns, s.path = c.Spec.KubeadmConfigSpec, c.Name, c.Namespace, "spec.kubeadmConfigSpec"
		s.role, s.version, s.replicas = roleControlPlane, c.Spec.Version, c.Spec.Replicas
	case controlPlaneV1beta1 + " KubeadmControlPlane":
		var c controlplanev1beta1.KubeadmControlPlane
		err = doc.Decode(&c)
		old, s.name, s.ns, s.path = &c.Spec.KubeadmConfigSpec, c.Name, c.Namespace, "spec.kubeadmConfigSpec"
		s.role, s.version, s.replicas = roleControlPlane, c.Spec.Version, c.Spec.Replicas
	case controlPlaneV1beta2 + " KubeadmControlPlaneTemplate":
		var c controlplanev1.KubeadmControlPlaneTemplate
		err = doc.Decode(&c)
		s.spec, s.name, s.ns, s.path = c.Spec.Template.Spec.KubeadmConfigSpec, c.Name, c.Namespace, "spec.template.spec.kubeadmConfigSpec"
		s.role = roleControlPlane
	case controlPlaneV1beta1 + " KubeadmControlPlaneTemplate":
		var c controlplanev1beta1.KubeadmControlPlaneTemplate
		err = doc.Decode(&c)
		old, s.name, s.ns, s.path = &c.Spec.Template.Spec.KubeadmConfigSpec, c.Name, c.Namespace, "spec.template.spec.kubeadmConfigSpec"
		s.role = roleControlPlane
	default:
		return nil, fmt.Errorf("%w: %s %s", platform.ErrUnknownKind, doc.APIVersion, doc.Kind)
	}
	if err != nil {
		return nil, err
	}
	if old != nil {
		if err := bootstrapv1beta1.Convert_v1beta1_KubeadmConfigSpec_To_v1beta2_KubeadmConfigSpec(old, &s.spec, nil); err != nil {
			return nil, spec.Errors{doc.Error(s.path, err.Error())}
		}
	}
	if s.name == "" {
		return nil, spec.Errors{doc.Error("metadata.name", "required")}
	}
	var meta struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if json.Unmarshal(doc.JSON, &meta) == nil {
		s.clusterLabel = meta.Metadata.Labels[platform.LabelClusterName]
	}
	return s, nil
}
