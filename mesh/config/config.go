// Package config holds the mesh's install manifests, embedded so that tools
// and tests apply the very files of this folder: the Peer CRD (crd/), the
// agent's RBAC and the namespace of its heartbeat Leases (rbac/), and the
// admission policies that let each agent write only its own node's state
// (admission/).
package config

import (
	"embed"
	"io/fs"
)

//go:embed crd/*.yaml rbac/*.yaml admission/*.yaml
var manifests embed.FS

// Manifests returns the manifests' paths, in the order to apply them (CRDs,
// then RBAC, then admission policies), and the file system holding them.
func Manifests() ([]string, fs.FS) {
	var paths []string
	for _, dir := range []string{"crd", "rbac", "admission"} {
		m, _ := fs.Glob(manifests, dir+"/*.yaml") // the pattern is valid
		paths = append(paths, m...)
	}
	return paths, manifests
}
