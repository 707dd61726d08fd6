// Package linktest creates throw-away network namespaces and links for the
// privileged tests of the mesh packages. Every name it makes starts with
// "kfl", and everything is removed in t.Cleanup, also when a test fails.
//
// Tests that use it are named TestPrivileged*: Require skips them when the
// process cannot create namespaces, or fails them when CI=true is set.
package linktest
