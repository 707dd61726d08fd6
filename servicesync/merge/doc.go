// Package merge is servicesync's pure core: from every cluster's export of
// one service (the ExportedServices, local and remote) it computes the
// import every cluster builds the same way (the Multi-Cluster Services
// rules: ports merged, every other property from the oldest export,
// conflicts named), the endpoints per source cluster after checking each
// remote address against the federation's ranges, the conditions of a
// local ServiceExport, and when a silent remote's endpoints are withdrawn.
// It does no I/O.
package merge
