// Package zone is the clusterset.local zone that kilofed's DNS server
// answers from: an in-memory index of ServiceImports and their EndpointSlices,
// kept as value types fed by a watch, and the records of the Multi-Cluster
// Services DNS specification (schema 1.0.0) computed from it. Records are
// rebuilt per service when that service's import or slices change, so a
// lookup is two map reads under a read lock and no I/O.
package zone
