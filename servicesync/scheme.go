package servicesync

import (
	"k8s.io/apimachinery/pkg/runtime"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kilofed/kilofed/federation/kube"
	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
)

// Scheme returns the federation's scheme with the MCS types and
// ExportedService added.
func Scheme() *runtime.Scheme {
	s := kube.Scheme()
	for _, add := range []func(*runtime.Scheme) error{mcsv1beta1.Install, ssv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // only on a programming error: conflicting registrations
		}
	}
	return s
}
