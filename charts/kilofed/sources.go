package chart

import "path/filepath"

// Copy is a file of the chart that is a byte-for-byte copy of a file
// elsewhere in the repository (go generate ./charts/kilofed writes it).
type Copy struct {
	// Chart is the path in the chart.
	Chart string
	// Source is the path from the repository's root.
	Source string
}

// SourceDirs are the folders whose CRDs the chart installs from crds/, each
// file under its own name: the mesh's Peer, the federation's objects and
// ClusterProperty, and the Multi-Cluster Services types of servicesync
// (while servicesync/config/crd does not exist, nothing is copied from it).
var SourceDirs = []string{"mesh/config/crd", "federation/config/crd", "servicesync/config/crd"}

// AdmissionCopy is the mesh's node-scoped admission policy, which the
// chart ships with the agent's ServiceAccount put in (templates/admission.yaml).
var AdmissionCopy = Copy{Chart: "files/node-scoped.yaml", Source: "mesh/config/admission/node-scoped.yaml"}

// AdmissionServiceAccount is the agent's user name in the mesh's policy, which
// the chart replaces with the release's agent ServiceAccount.
const AdmissionServiceAccount = "system:serviceaccount:kube-system:kilo"

// Copies returns every copied file of the chart, with its source under the
// repository root root: one crds/ file per CRD of SourceDirs, and
// AdmissionCopy.
func Copies(root string) ([]Copy, error) {
	var out []Copy
	for _, dir := range SourceDirs {
		m, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range m {
			out = append(out, Copy{Chart: "crds/" + filepath.Base(f), Source: dir + "/" + filepath.Base(f)})
		}
	}
	return append(out, AdmissionCopy), nil
}
