//go:build !linux

package kubelet

import (
	"errors"
	"time"
)

// startProcess needs Linux network namespaces.
func startProcess(processSpec) (*process, error) {
	return nil, errors.ErrUnsupported
}

// stop needs Linux.
func (p *process) stop(time.Duration) error {
	return errors.ErrUnsupported
}
