package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDeviceHealthFailsOnlyAfterNoAnswerForStale(t *testing.T) {
	now := time.Unix(1000, 0)
	h := newDeviceHealth(2*time.Second, func() time.Time { return now })
	if err := h.err(); err != nil {
		t.Fatalf("just started: %v, want nil (no check has had its chance yet)", err)
	}
	now = now.Add(time.Second)
	h.record(errors.New("context deadline exceeded"), now)
	if err := h.err(); err != nil {
		t.Fatalf("one slow read within 2s of the last answer: %v, want nil", err)
	}
	now = now.Add(1500 * time.Millisecond)
	err := h.err()
	if err == nil || !strings.Contains(err.Error(), "no answer for 2.5s") || !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Fatalf("2.5s without an answer: %v, want how long and the last error", err)
	}
	h.record(nil, now)
	if err := h.err(); err != nil {
		t.Fatalf("answered again: %v, want nil", err)
	}
	now = now.Add(3 * time.Second)
	if err := h.err(); err == nil || err.Error() != "no answer for 3s" {
		t.Fatalf("checks stopped coming back for 3s: %v, want %q", err, "no answer for 3s")
	}
}
