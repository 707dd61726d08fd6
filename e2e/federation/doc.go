// Package federation holds the federation's lab tests: two clusters of two
// locations each (one behind NAT), joined with the real kilofed CLI, with a
// kilofed-controller per cluster running beside them; the tests prove what
// issue "federation" promises (cross-cluster traffic, scoped tokens,
// refusals that write nothing, gateway failover followed, API outages
// survived, unjoin). They need root and the lab's binaries (see e2e/lab).
package federation
