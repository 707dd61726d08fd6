package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
)

// A link reads its remote every poll; a watch of the remote Announcement
// (the token may watch it) wakes it as soon as the remote changes, so that a
// failover or a key rotation reaches the local Peers in the time of one read
// rather than up to a poll later. The poll stays: it is what notices an
// unreachable API server and what catches up after a broken watch.

// watchAnnouncements returns a function that starts a watch of the
// Announcement of the cluster cfg reaches.
func watchAnnouncements(cfg *rest.Config) (func(context.Context) (watch.Interface, error), error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	res := dyn.Resource(fedv1.SchemeGroupVersion.WithResource("announcements")).Namespace(fedv1.Namespace)
	return func(ctx context.Context) (watch.Interface, error) {
		return res.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", fedv1.AnnouncementName).String()})
	}, nil
}

// wakeOnChange sends on wake (without blocking: one pending wake is
// enough) for every event of the watches start returns, until ctx ends. A
// watch that fails or ends is started again after retry.
func wakeOnChange(ctx context.Context, start func(context.Context) (watch.Interface, error), retry time.Duration, wake chan<- struct{}) {
	for ctx.Err() == nil {
		if w, err := start(ctx); err == nil {
			drain(ctx, w, wake)
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// drain forwards w's events as wakes until w ends or ctx does.
func drain(ctx context.Context, w watch.Interface, wake chan<- struct{}) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}
