//go:build !linux

package lab

import (
	"context"
	"errors"
)

// StopAPIServer needs Linux.
func (c *Cluster) StopAPIServer() error { return errors.ErrUnsupported }

// StartAPIServer needs Linux.
func (c *Cluster) StartAPIServer(context.Context) error { return errors.ErrUnsupported }

// StopControlPlane needs Linux.
func (c *Cluster) StopControlPlane() error { return errors.ErrUnsupported }

// StartControlPlane needs Linux.
func (c *Cluster) StartControlPlane(context.Context) error { return errors.ErrUnsupported }

// FreezeAPIServer needs Linux.
func (c *Cluster) FreezeAPIServer() error { return errors.ErrUnsupported }

// ThawAPIServer needs Linux.
func (c *Cluster) ThawAPIServer(context.Context) error { return errors.ErrUnsupported }

// APIServerProcess needs Linux.
func (c *Cluster) APIServerProcess() *Process { return nil }
