// Package crd holds vminit's CustomResourceDefinitions as applied by
// `kubectl apply -k deploy/kubernetes`, for programs and tests that create
// them through the API. scripts/generate.sh writes them from the Go types
// (kube/api/v1alpha1).
package crd

import _ "embed"

// Instances is the Instance CRD (instances.vminit.dev).
//
//go:embed vminit.dev_instances.yaml
var Instances []byte
