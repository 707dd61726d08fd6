//go:build linux

package kubelet

import (
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLockedStarterUsesOneThread checks that every start, from any
// goroutine, forks from the same OS thread (see lockedStarter).
func TestLockedStarterUsesOneThread(t *testing.T) {
	var tids []int
	s := newLockedStarter(func(processSpec) (*process, error) {
		tids = append(tids, unix.Gettid())
		return exitedProcess(0, time.Now()), nil
	})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := s.Start(processSpec{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s.Close()
	if len(tids) != 16 {
		t.Fatalf("%d starts ran, want 16", len(tids))
	}
	for _, tid := range tids {
		if tid != tids[0] {
			t.Fatalf("starts ran on threads %v, want one thread", tids)
		}
	}
	if tids[0] == unix.Gettid() {
		t.Error("start ran on the test's own thread")
	}
}

// TestProcessStop checks the kill path on a real process group: a shell
// that ignores SIGTERM is killed after the grace period, with its child.
func TestProcessStop(t *testing.T) {
	tests := []struct {
		name      string
		argv      []string
		grace     time.Duration
		wantCode  int32
		wantAbove time.Duration
		wantBelow time.Duration // 0: no bound
	}{
		{name: "SIGTERM ends a sleep", argv: []string{"sleep", "60"}, grace: 3 * time.Second, wantCode: 128 + 15},
		{name: "SIGKILL after grace when SIGTERM is ignored", argv: []string{"sh", "-c", "trap '' TERM; sleep 60 & wait"},
			grace: 300 * time.Millisecond, wantCode: 128 + 9, wantAbove: 300 * time.Millisecond, wantBelow: 1500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := startProcess(processSpec{Argv: tt.argv, LogPath: t.TempDir() + "/log"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = unix.Kill(-p.pid, unix.SIGKILL) }) // if stop failed
			time.Sleep(100 * time.Millisecond)                        // let the shell install its trap
			start := time.Now()
			if err := p.stop(tt.grace); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if took := time.Since(start); took < tt.wantAbove || (tt.wantBelow > 0 && took > tt.wantBelow) {
				t.Errorf("stop took %v, want between %v and %v", took, tt.wantAbove, tt.wantBelow)
			}
			if p.exitCode != tt.wantCode {
				t.Errorf("exit code %d, want %d", p.exitCode, tt.wantCode)
			}
			if groupHasLiveMember(p.pid) {
				t.Errorf("process group %d still has live members", p.pid)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name      string
		stat      string
		wantState string
		wantPgrp  int
		wantOK    bool
	}{
		{name: "plain", stat: "1234 (sleep) S 1 1234 1234 0 -1", wantState: "S", wantPgrp: 1234, wantOK: true},
		{name: "comm with spaces and parens", stat: "77 (a (b) c) Z 1 70 70 0", wantState: "Z", wantPgrp: 70, wantOK: true},
		{name: "truncated", stat: "77 (x) R", wantOK: false},
		{name: "garbage", stat: "nonsense", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, pgrp, ok := parseStat(tt.stat)
			if ok != tt.wantOK || (ok && (state != tt.wantState || pgrp != tt.wantPgrp)) {
				t.Errorf("parseStat = %q, %d, %v; want %q, %d, %v", state, pgrp, ok, tt.wantState, tt.wantPgrp, tt.wantOK)
			}
		})
	}
}
