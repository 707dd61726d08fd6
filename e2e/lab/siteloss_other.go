//go:build !linux

package lab

import "errors"

// LoseSite needs Linux.
func (c *Cluster) LoseSite() error { return errors.ErrUnsupported }
