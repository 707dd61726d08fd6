//go:build !linux

package lab

import (
	"context"
	"errors"
)

// InstallMesh needs Linux (the lab's kubectl and API server).
func (c *Cluster) InstallMesh(context.Context) error { return errors.ErrUnsupported }

// AgentKubeconfig needs Linux.
func (n *Node) AgentKubeconfig(context.Context) (string, error) { return "", errors.ErrUnsupported }
