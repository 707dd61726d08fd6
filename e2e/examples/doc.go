// Package examples runs the examples of examples/ in the lab: each test
// applies an example's very manifests and scripts with the real kubectl and
// checks what the example's README says a user sees.
package examples
