package k8s

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// failingLW fails its first calls with the given errors, then answers.
type failingLW struct {
	errs  []error
	calls int
}

func (f *failingLW) next() error {
	f.calls++
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func (f *failingLW) List(metav1.ListOptions) (runtime.Object, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return &corev1.NodeList{}, nil
}

func (f *failingLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return watch.NewFake(), nil
}

func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: syscall.ECONNREFUSED.Error()}}
}

func TestPatientListWatchRetriesWhileTheAPIServerCannotBeReached(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("starting")
	for _, call := range []string{"list", "watch"} {
		t.Run(call, func(t *testing.T) {
			f := &failingLW{errs: []error{refused(), unavailable, refused()}}
			p := Patient(f).(*patient)
			p.every = time.Millisecond
			var err error
			if call == "list" {
				_, err = p.ListWithContext(context.Background(), metav1.ListOptions{})
			} else {
				_, err = p.WatchWithContext(context.Background(), metav1.ListOptions{})
			}
			if err != nil {
				t.Fatalf("%s returned %v to the reflector, want the answer once the server is back", call, err)
			}
			if f.calls != 4 {
				t.Errorf("%s made %d calls, want 4 (3 failures, then the answer)", call, f.calls)
			}
		})
	}
}

func TestPatientListWatchHandsTheServersAnswersToTheReflector(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	for name, want := range map[string]error{
		"gone":      apierrors.NewResourceExpired("too old resource version"),
		"forbidden": apierrors.NewForbidden(gr, "", errors.New("no")),
		"not found": apierrors.NewNotFound(gr, ""),
	} {
		t.Run(name, func(t *testing.T) {
			f := &failingLW{errs: []error{want}}
			p := Patient(f).(*patient)
			p.every = time.Millisecond
			if _, err := p.WatchWithContext(context.Background(), metav1.ListOptions{}); !errors.Is(err, want) {
				t.Errorf("watch returned %v, want the server's %v at once", err, want)
			}
			if f.calls != 1 {
				t.Errorf("%d calls, want 1: the server answered", f.calls)
			}
		})
	}
}

func TestPatientListWatchStopsWithItsContext(t *testing.T) {
	f := &failingLW{errs: []error{refused(), refused(), refused(), refused()}}
	p := Patient(f).(*patient)
	p.every = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.ListWithContext(ctx, metav1.ListOptions{})
		done <- err
	}()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a list stopped by its context returned no error")
	}
}

// The reflector uses the context methods when a ListerWatcher has them.
var _ cache.ListerWatcherWithContext = Patient(&failingLW{})
