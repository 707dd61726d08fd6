//go:build !linux

package kubelet

import (
	"errors"
	"log/slog"
)

// otherNetwork is the podNetwork of systems without network namespaces.
type otherNetwork struct{}

// newPodNetwork returns the platform's podNetwork.
func newPodNetwork(*slog.Logger) podNetwork { return otherNetwork{} }

// Setup needs Linux.
func (otherNetwork) Setup(sandboxSpec) error { return errors.ErrUnsupported }

// Teardown needs Linux.
func (otherNetwork) Teardown(sandboxSpec) error { return errors.ErrUnsupported }

// kernelVersion is unknown off Linux.
func kernelVersion() string { return "unknown" }
