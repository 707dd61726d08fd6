// Package install holds the end-to-end test of the install path: the chart
// (charts/kilofed) installed with the real helm CLI into a lab cluster whose
// kubelet stand-ins run kilofed's images as the real kg and
// kilofed-controller binaries, the seeds' commands against it, and helm
// uninstall leaving the nodes clean.
package install
