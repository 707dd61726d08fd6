package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// electLeaseName is the Lease that kilofed-controller replicas contend for.
const electLeaseName = "kilofed-controller"

// errLostLead ends the process when another replica took the Lease: the
// work's state is then stale, and a restart (the kubelet's) starts over as a
// standby.
var errLostLead = errors.New("lost the kilofed-controller Lease to another replica: exiting so that this replica restarts as a standby")

// election is how replicas of kilofed-controller share the work: only the
// holder of the Lease writes (federation and servicesync); every replica
// serves DNS, /metrics and /health.
type election struct {
	enabled             bool
	namespace, identity string
	lease, renew, retry time.Duration
	leading             prometheus.Gauge
}

func electionFlags(fs *flag.FlagSet, o *election) {
	host, _ := os.Hostname()
	fs.BoolVar(&o.enabled, "leader-elect", false, "run federation and servicesync only while holding the Lease kilofed-controller (for several replicas; DNS is served by every replica)")
	fs.StringVar(&o.namespace, "leader-elect-namespace", "kilofed-system", "namespace of the kilofed-controller Lease")
	fs.StringVar(&o.identity, "leader-elect-identity", host+"_"+string(uuid.NewUUID()), "this replica's name in the Lease")
	fs.DurationVar(&o.lease, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before it takes the Lease")
	fs.DurationVar(&o.renew, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it gives up leading")
	fs.DurationVar(&o.retry, "leader-elect-retry-period", 2*time.Second, "how often candidates try to take or renew the Lease")
}

// run calls work directly when election is off. Otherwise it waits for the
// Lease, runs work while holding it, and returns errLostLead if the Lease is
// lost while ctx is alive (work's own result if work returns by itself); on ctx's end it releases the Lease, so that a
// standby takes over at once instead of after the lease duration.
func (e election) run(ctx context.Context, cfg *rest.Config, log *slog.Logger, work func(context.Context) error) error {
	if !e.enabled {
		e.setLeading(true)
		return work(ctx)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.namespace, Name: electLeaseName},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.identity},
	}
	// The work stops before the Lease is released, so that two replicas
	// never write at once: workCtx ends with ctx, leCtx (the elector's)
	// only once the work has returned.
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	leCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	started, workDone := make(chan struct{}), make(chan struct{})
	var workErr error
	// byItself says that the work returned while its context was alive
	// (not stopped by a lost Lease or by ctx): its result is then run's.
	var byItself bool
	waitWork := func() {
		stopWork()
		select {
		case <-started:
			<-workDone
		default:
		}
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: e.lease, RenewDeadline: e.renew, RetryPeriod: e.retry,
		ReleaseOnCancel: true, Name: electLeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				close(started)
				e.setLeading(true)
				log.Info("leading: this replica runs federation and servicesync", "lease", e.namespace+"/"+electLeaseName, "identity", e.identity)
				workErr = work(workCtx)
				byItself = workCtx.Err() == nil
				close(workDone)
				stopElector()
			},
			OnStoppedLeading: func() { e.setLeading(false) },
			OnNewLeader: func(id string) {
				if id != e.identity {
					log.Info("standby: another replica leads", "leader", id, "lease", e.namespace+"/"+electLeaseName)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	go func() {
		select {
		case <-ctx.Done():
			waitWork()
			stopElector()
		case <-leCtx.Done():
		}
	}()
	le.Run(leCtx)
	waitWork()
	select {
	case <-started:
	default:
		return nil // ctx ended before this replica led
	}
	switch {
	case byItself, workErr != nil && !errors.Is(workErr, context.Canceled):
		return workErr
	case ctx.Err() == nil:
		return errLostLead
	}
	return nil
}

func (e election) setLeading(on bool) {
	if e.leading == nil {
		return
	}
	if on {
		e.leading.Set(1)
	} else {
		e.leading.Set(0)
	}
}
