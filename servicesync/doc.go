// Package servicesync is the Multi-Cluster Services controller of
// kilofed-controller. Each cluster publishes its ServiceExports as
// ExportedServices in its namespace kilofed-system; each cluster reads
// the joined clusters' ExportedServices with the federation's scoped
// tokens, merges them with its own (package merge) and writes, locally, a
// ServiceImport, a derived Service and EndpointSlices per source cluster,
// and the conditions of its ServiceExports. Nothing is ever written into
// another cluster.
package servicesync
