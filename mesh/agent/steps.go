package agent

import (
	"errors"
	"fmt"
	"time"
)

// The steps of a reconciliation, as kilo_reconcile_step_errors labels them.
const (
	stepKey           = "key"
	stepTopology      = "topology"
	stepPublish       = "publish"
	stepWireGuard     = "wireguard"
	stepAddress       = "address"
	stepLink          = "link"
	stepEncapsulation = "encapsulation"
	stepRoutes        = "routes"
	stepFirewall      = "firewall"
)

// reconcileSteps are all steps, in the order they run.
var reconcileSteps = []string{stepKey, stepTopology, stepPublish, stepWireGuard, stepAddress, stepLink, stepEncapsulation, stepRoutes, stepFirewall}

// apiTimeout bounds each write to the API server in a reconciliation, so
// that an unreachable API server delays the loop but never stalls it.
const apiTimeout = 10 * time.Second

// stepErrors collects the errors of one reconciliation's steps.
type stepErrors struct {
	errs   []error
	failed map[string]bool
}

// add records err, if any, as a failure of step, described as what.
func (s *stepErrors) add(step, what string, err error) {
	if err == nil {
		return
	}
	if s.failed == nil {
		s.failed = map[string]bool{}
	}
	s.failed[step] = true
	s.errs = append(s.errs, fmt.Errorf("%s: %w", what, err))
}

// err joins the recorded errors; nil when every step succeeded.
func (s *stepErrors) err() error { return errors.Join(s.errs...) }
