// Package mesh holds the end-to-end tests of the kg agent on the lab: real
// API servers, real node namespaces, the real kg binary with embedded
// WireGuard, pods answering HTTP across locations.
package mesh
