// Package services holds servicesync's lab tests: two clusters joined with
// the real kilofed CLI, a kilofed-controller per cluster (federation and
// servicesync), the MCS CRDs installed; a ServiceExport in one cluster must
// give, in the other, a ServiceImport, a derived Service that kube-proxy
// programs and EndpointSlices that follow the pods, reached through the
// tunnel. They need root and the lab's binaries (see e2e/lab).
package services
