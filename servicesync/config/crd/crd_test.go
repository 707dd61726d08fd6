package crd

import "testing"

// TestCRDsAreTheMCSTypesAndExportedService: the embedded CRDs are the
// three servicesync installs, with v1beta1 the MCS storage version.
func TestCRDsAreTheMCSTypesAndExportedService(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"exportedservices.federation.kilofed.io": "v1alpha1",
		"serviceexports.multicluster.x-k8s.io":   "v1beta1",
		"serviceimports.multicluster.x-k8s.io":   "v1beta1",
	}
	if len(crds) != len(want) {
		t.Errorf("%d CRDs, want %d", len(crds), len(want))
	}
	for _, c := range crds {
		storage := ""
		for _, v := range c.Spec.Versions {
			if v.Storage {
				storage = v.Name
			}
		}
		if w, ok := want[c.Name]; !ok || storage != w {
			t.Errorf("CRD %s stores %q, want %q", c.Name, storage, w)
		}
	}
}
