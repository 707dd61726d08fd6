package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kilofed/kilofed/mesh/k8s/k8stest"
)

// workLog records when each replica's work ran.
type workLog struct {
	mu     sync.Mutex
	events []string // "start a", "stop a", ...
	start  chan string
}

func (w *workLog) work(id string) func(context.Context) error {
	return func(ctx context.Context) error {
		w.mu.Lock()
		w.events = append(w.events, "start "+id)
		w.mu.Unlock()
		w.start <- id
		<-ctx.Done()
		time.Sleep(300 * time.Millisecond) // a writer still finishing its last write
		w.mu.Lock()
		w.events = append(w.events, "stop "+id)
		w.mu.Unlock()
		return ctx.Err()
	}
}

func testElection(id string) election {
	return election{enabled: true, namespace: "kilofed-system", identity: id,
		lease: 4 * time.Second, renew: 3 * time.Second, retry: 200 * time.Millisecond}
}

// TestLeaderElectionOneReplicaWritesAtATime proves that of two replicas only
// one runs the work, that the standby takes over as soon as the leader stops
// (it releases the Lease: no wait for the lease duration), and that the
// leader's work has ended before the standby's begins.
func TestLeaderElectionOneReplicaWritesAtATime(t *testing.T) {
	env := k8stest.Start(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kilofed-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &workLog{start: make(chan string, 2)}
	ctxA, stopA := context.WithCancel(t.Context())
	ctxB, stopB := context.WithCancel(t.Context())
	defer stopB()
	errA, errB := make(chan error, 1), make(chan error, 1)
	go func() { errA <- testElection("a").run(ctxA, env.Config, log, w.work("a")) }()
	if got := <-w.start; got != "a" {
		t.Fatalf("first leader %q, want a", got)
	}
	go func() { errB <- testElection("b").run(ctxB, env.Config, log, w.work("b")) }()
	select {
	case got := <-w.start:
		t.Fatalf("%s started while a leads", got)
	case <-time.After(2 * time.Second): // 10 retry periods
	}
	stopA()
	began := time.Now()
	if got := <-w.start; got != "b" {
		t.Fatalf("second leader %q, want b", got)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("b led %v after a stopped: the Lease was not released (lease duration 4 s)", took)
	}
	if err := <-errA; err != nil {
		t.Errorf("a ended with %v, want nil after its context ended", err)
	}
	w.mu.Lock()
	got := append([]string(nil), w.events...)
	w.mu.Unlock()
	want := []string{"start a", "stop a", "start b"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("events %v, want %v: the two replicas' work overlapped", got, want)
	}
	stopB()
	if err := <-errB; err != nil {
		t.Errorf("b ended with %v", err)
	}
}

// TestLeaderElectionLostLeaseEndsTheProcess proves that a leader whose Lease
// is taken (here written over by hand, as after a partition) stops its work
// and returns errLostLead, so that the process exits and restarts as a
// standby instead of writing beside the new leader.
func TestLeaderElectionLostLeaseEndsTheProcess(t *testing.T) {
	env := k8stest.Start(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kilofed-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &workLog{start: make(chan string, 1)}
	errA := make(chan error, 1)
	go func() { errA <- testElection("a").run(t.Context(), env.Config, log, w.work("a")) }()
	<-w.start
	leases := kube.CoordinationV1().Leases("kilofed-system")
	other := "someone-else"
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(t.Context(), electLeaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = &other
		now := metav1.NowMicro()
		l.Spec.RenewTime = &now
		_, err = leases.Update(t.Context(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errA:
		if !errors.Is(err, errLostLead) {
			t.Fatalf("run = %v, want errLostLead", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the leader kept running 15 s after its Lease was taken")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.events); n != 2 || w.events[1] != "stop a" {
		t.Errorf("events %v: the work did not end before run returned", w.events)
	}
}

// TestElectionOffRunsTheWork proves that without --leader-elect the work runs
// at once and the gauge says leading.
func TestElectionOffRunsTheWork(t *testing.T) {
	ran := false
	err := election{}.run(t.Context(), nil, slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context) error { ran = true; return nil })
	if err != nil || !ran {
		t.Fatalf("run = %v, ran %v", err, ran)
	}
}

// TestLeaderElectionWorkEndingByItselfIsReportedAsIs proves that when the
// work returns on its own while this replica leads and its context is alive,
// run returns the work's own result (nil or its error), not errLostLead: no
// Lease was lost, and the message would send the operator the wrong way.
func TestLeaderElectionWorkEndingByItselfIsReportedAsIs(t *testing.T) {
	env := k8stest.Start(t)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kilofed-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name string
		ret  error
	}{{"nil", nil}, {"an error", errors.New("controller failed")}} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				done <- testElection("a").run(t.Context(), env.Config, log, func(context.Context) error { return tc.ret })
			}()
			select {
			case err := <-done:
				if err != tc.ret {
					t.Fatalf("run = %v, want the work's own result %v", err, tc.ret)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("run did not return 15 s after the work did")
			}
		})
	}
}
