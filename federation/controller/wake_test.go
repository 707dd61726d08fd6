package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	fedv1 "github.com/kilofed/kilofed/federation/apis/federation/v1alpha1"
)

func TestWakeOnChangeWakesOnEveryEventAndRestartsABrokenWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watches := make(chan *watch.FakeWatcher, 3)
	starts := 0
	start := func(context.Context) (watch.Interface, error) {
		starts++
		if starts == 2 {
			return nil, errors.New("connection refused")
		}
		w := watch.NewFake()
		watches <- w
		return w, nil
	}
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wakeOnChange(ctx, start, time.Millisecond, wake)
	}()

	first := <-watches
	first.Modify(&fedv1.Announcement{})
	<-wake // one event, one wake
	first.Stop()
	// The watch ended, the next start fails, the one after that works.
	second := <-watches
	second.Add(&fedv1.Announcement{})
	<-wake
	cancel()
	<-done
	if starts < 3 {
		t.Errorf("%d watches started, want 3 (the first, a failed one, the one after)", starts)
	}
}

func TestWakeOnChangeNeverBlocksOnAPendingWake(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := watch.NewFakeWithChanSize(3, false)
	for range 3 {
		w.Modify(&fedv1.Announcement{})
	}
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		drain(ctx, w, wake)
	}()
	<-wake
	cancel()
	<-done // drain returned although nobody took the later wakes
}
