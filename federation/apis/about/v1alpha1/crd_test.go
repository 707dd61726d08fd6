package v1alpha1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDCarriesTheProtectedGroupApproval: about.k8s.io is a protected
// group (*.k8s.io), so the API server refuses its CRD without the
// api-approved.kubernetes.io annotation.
func TestCRDCarriesTheProtectedGroupApproval(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "about.k8s.io_clusterproperties.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Group != GroupName {
		t.Fatalf("CRD of group %s, want %s", crd.Spec.Group, GroupName)
	}
	if v := crd.Annotations["api-approved.kubernetes.io"]; !strings.HasPrefix(v, "https://github.com/kubernetes/enhancements/pull/") {
		t.Errorf("the CRD of %s has api-approved.kubernetes.io %q, want the KEP's pull request URL", crd.Spec.Group, v)
	}
}
