// Package v1alpha1 is the About API's about.k8s.io/v1alpha1 (KEP-2149) as
// kilofed uses it: the cluster-scoped ClusterProperty, whose well-known
// object cluster.clusterset.k8s.io holds the cluster's ID. The module
// sigs.k8s.io/about-api is not served by the Go module proxy, so the type is
// defined here with the same group, version, kind and schema; its CRD is in
// federation/config/crd.
//
// +kubebuilder:object:generate=true
// +groupName=about.k8s.io
package v1alpha1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.1 object crd paths=./... output:crd:dir=../../../config/crd
