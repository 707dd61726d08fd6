// Package crd embeds the CustomResourceDefinitions servicesync needs: the
// Multi-Cluster Services API's ServiceExport and ServiceImport (generated
// from sigs.k8s.io/mcs-api's types, v1beta1 the storage version) and
// kilofed's ExportedService (generated from servicesync/apis/v1alpha1).
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.20.1 crd paths=sigs.k8s.io/mcs-api/pkg/apis/... output:crd:dir=.

// Files holds the CRDs' YAML files.
//
//go:embed *.yaml
var Files embed.FS

// CRDs returns every embedded CRD, parsed, sorted by file name.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(Files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		b, err := Files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(strings.TrimPrefix(string(b), "---\n")), &crd); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", n, err)
		}
		out = append(out, &crd)
	}
	return out, nil
}
