package servicesync_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kilofed/kilofed/servicesync"
)

// controller-runtime's logs (the informers') are not the tests' concern.
func init() { ctrllog.SetLogger(logr.Discard()) }

// TestLocalClientWithoutRightsFailsNamingTheKind proves that the informers
// of servicesync's client are synced when it is made: a controller whose
// ServiceAccount may not list and watch what servicesync reads fails at
// start with the kind named and where to look, instead of reads that hang
// later.
func TestLocalClientWithoutRightsFailsNamingTheKind(t *testing.T) {
	c := startExportedWeb(t)
	defer servicesync.SetSyncTimeout(2 * time.Second)()
	cfg := rest.CopyConfig(c.admin.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:no-rights"}
	_, err := servicesync.NewLocalClient(t.Context(), cfg)
	if err == nil {
		t.Fatal("NewLocalClient without rights: no error")
	}
	for _, want := range []string{"ServiceExport", "RBAC"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
