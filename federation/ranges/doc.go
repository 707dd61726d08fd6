// Package ranges holds the federation's conflict rules for address ranges:
// which of the pod, service and WireGuard ranges of joined clusters overlap
// each other, and which ranges read from a remote cluster may be routed
// locally. It is pure (no I/O) and shared by `kilofed join`, which refuses
// a join on any conflict, and the controller, which keeps checking after
// the join and leaves a conflicting range out while the rest keeps working.
//
// Two ranges conflict when they overlap, in either direction: a remote
// 10.0.0.0/8 hijacks a local 10.1.0.0/16 as surely as the reverse.
package ranges
