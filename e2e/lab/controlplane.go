package lab

import (
	"context"
	"errors"
	"sync"
)

// ErrControlPlaneState is returned when a control-plane component is
// started while it runs, or stopped while it is stopped.
var ErrControlPlaneState = errors.New("control-plane component in the wrong state")

// component is one process of a cluster's control plane, kept with what it
// takes to start it again: the same command line (data dir, certificates,
// ports and address), so that a restart is the same server.
type component struct {
	name  string
	argv  []string
	tier  int
	ready func(context.Context, *Process) error // waits until it serves
	proc  *Process                              // the last run; nil before Start
}

// controlPlane holds a cluster's etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler; mu serializes stops and starts.
type controlPlane struct {
	mu                   sync.Mutex
	etcd, apiserver, kcm component
	scheduler            component
}
