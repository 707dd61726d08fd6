//go:build !linux

package lab

import (
	"context"
	"errors"
	"syscall"
)

// Start needs Linux (network namespaces); elsewhere it returns
// errors.ErrUnsupported.
func Start(context.Context, Spec, ...Option) (*Lab, error) { return nil, errors.ErrUnsupported }

// Sweep needs Linux; elsewhere it returns errors.ErrUnsupported.
func Sweep(context.Context) error { return errors.ErrUnsupported }

// Close does nothing outside Linux.
func (l *Lab) Close() error { return nil }

// Signal needs Linux.
func (p *Process) Signal(syscall.Signal) error { return errors.ErrUnsupported }

// Stop needs Linux.
func (p *Process) Stop() error { return errors.ErrUnsupported }

// Kill needs Linux.
func (p *Process) Kill() error { return errors.ErrUnsupported }

// Exec needs Linux.
func (ns *Namespace) Exec(context.Context, ...string) ([]byte, error) {
	return nil, errors.ErrUnsupported
}

// Get needs Linux.
func (ns *Namespace) Get(context.Context, string) (string, error) { return "", errors.ErrUnsupported }

func (ns *Namespace) start(string, []string) (*Process, error) { return nil, errors.ErrUnsupported }

// Down needs Linux.
func (n *Node) Down() error { return errors.ErrUnsupported }

// Up needs Linux.
func (n *Node) Up() error { return errors.ErrUnsupported }

// Kubectl needs Linux.
func (c *Cluster) Kubectl(context.Context, ...string) ([]byte, error) {
	return nil, errors.ErrUnsupported
}

// PodNamespace needs Linux.
func (c *Cluster) PodNamespace(context.Context, string, string) (*Namespace, error) {
	return nil, errors.ErrUnsupported
}

// PodExec needs Linux.
func (l *Lab) PodExec(context.Context, string, string, string, ...string) ([]byte, error) {
	return nil, errors.ErrUnsupported
}

// PodGet needs Linux.
func (l *Lab) PodGet(context.Context, string, string, string, string) (string, error) {
	return "", errors.ErrUnsupported
}

// AddHost needs Linux.
func (l *Lab) AddHost(context.Context, string, HostOptions) (*Host, error) {
	return nil, errors.ErrUnsupported
}

// StartAgent needs Linux.
func (n *Node) StartAgent(AgentOptions) (*Process, error) { return nil, errors.ErrUnsupported }

// NsEnter needs Linux.
func (p *Process) NsEnter(context.Context, ...string) ([]byte, error) {
	return nil, errors.ErrUnsupported
}
