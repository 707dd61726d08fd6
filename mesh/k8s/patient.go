package k8s

import (
	"context"
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// PatientRetry is how often a patient ListerWatcher retries while the API
// server cannot be reached.
const PatientRetry = 500 * time.Millisecond

// Patient wraps an informer's ListerWatcher so that its reflector does not
// learn of an API server outage.
//
// A reflector backs off on every failed list or watch: 0.8 s, doubled on each
// failure up to 30 s, with as much jitter again. After an outage of half a
// minute its next attempt can come up to a minute after the API server is
// back, and until then the cache is stale: a Peer or a key changed in the
// meantime reaches nobody (the lab saw a rotated key followed by the remote
// cluster's Peer in 0.5 s and by the agents 20 s later). A patient
// ListerWatcher retries a list or a watch that could not reach the server
// every PatientRetry until it can or ctx ends, so the reflector's backoff
// never grows during an outage, and the cache is fresh within a second of
// the server's return. Answers from the server (a 410 for a compacted
// resource version, a 403) are handed to the reflector as they are.
func Patient(lw cache.ListerWatcher) ListerWatcher {
	return &patient{inner: cache.ToListerWatcherWithContext(lw), plain: lw, every: PatientRetry}
}

// ListerWatcher is a ListerWatcher with and without contexts: informers
// take the one, their reflectors use the other.
type ListerWatcher interface {
	cache.ListerWatcher
	cache.ListerWatcherWithContext
}

type patient struct {
	inner cache.ListerWatcherWithContext
	plain cache.ListerWatcher
	every time.Duration
}

// unreachable reports whether err means that the request did not get an
// answer from a working API server: no HTTP status at all (refused, reset,
// timed out), or one a server gives while it starts or is overloaded.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		switch st.Status().Code {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	return true
}

func retryUnreachable[T any](ctx context.Context, every time.Duration, call func() (T, error)) (T, error) {
	for {
		v, err := call()
		if err == nil || !unreachable(err) || ctx.Err() != nil {
			return v, err
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

func (p *patient) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return retryUnreachable(ctx, p.every, func() (runtime.Object, error) { return p.inner.ListWithContext(ctx, opts) })
}

func (p *patient) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return retryUnreachable(ctx, p.every, func() (watch.Interface, error) { return p.inner.WatchWithContext(ctx, opts) })
}

// List and Watch serve callers that predate contexts; they do not retry,
// having no way to be stopped.
func (p *patient) List(opts metav1.ListOptions) (runtime.Object, error) { return p.plain.List(opts) }

func (p *patient) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.plain.Watch(opts)
}
