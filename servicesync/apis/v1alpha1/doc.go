// Package v1alpha1 holds ExportedService (federation.kilofed.io/v1alpha1),
// what a cluster publishes, in its namespace kilofed-system, of each of its
// ServiceExports: the exported Service's properties that the Multi-Cluster
// Services API merges, and its endpoints. The joined clusters read them
// with their scoped tokens and build their ServiceImports from them; a
// cluster never writes into another.
//
// +kubebuilder:object:generate=true
// +groupName=federation.kilofed.io
package v1alpha1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.1 object crd paths=./... output:crd:dir=../../config/crd
