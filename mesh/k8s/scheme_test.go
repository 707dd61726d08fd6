package k8s_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kilofed/kilofed/mesh/apis/kilo/v1alpha1"
)

func runtimeScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}
