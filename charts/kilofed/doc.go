// Package chart holds kilofed's Helm chart (the files of this folder) and
// renders it with the Helm library, for the tests and for the plain
// manifests of deploy/ (make manifests). The chart's copies of the mesh's
// and the federation's install files (crds/, files/) and the values table
// of its README are generated from their sources: run go generate
// ./charts/kilofed after changing one; a test fails while they differ.
package chart

//go:generate go run ./gen
