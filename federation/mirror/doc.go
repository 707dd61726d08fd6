// Package mirror turns what a remote cluster announces into the local Peers
// that carry its traffic, and this cluster's mesh topology into what it
// announces. Both directions are pure functions: the controller reads the
// objects, calls them and writes the results.
//
// A remote is never trusted: every range it announces is checked against
// the local ranges and those of the other members (federation/ranges), and
// a gateway's allowed IPs keep only what lies inside an accepted range.
// What is refused is reported, never routed; the rest keeps working.
package mirror
