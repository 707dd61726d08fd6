package workload

import (
	"context"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "no subcommand", args: nil},
		{name: "unknown subcommand", args: []string{"tcp-echo"}},
		{name: "bad port", args: []string{"http", "--port", "http"}},
		{name: "port out of range", args: []string{"udp", "--port", "70000"}},
		{name: "negative sleep", args: []string{"sleep", "--seconds", "-1"}},
		{name: "unknown flag", args: []string{"sleep", "--minutes", "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, io.Discard)
			checkErr(t, err, ErrUsage)
		})
	}
}

func TestRunSleep(t *testing.T) {
	tests := []struct {
		name      string
		seconds   int
		cancel    bool
		wantUnder time.Duration
	}{
		{name: "timer ends", seconds: 1, wantUnder: 3 * time.Second},
		{name: "forever until stopped", seconds: 0, cancel: true, wantUnder: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready := filepath.Join(t.TempDir(), "ready")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"sleep", "--seconds", strconv.Itoa(tt.seconds), "--ready-file", ready}, io.Discard, io.Discard)
			}()
			waitFile(t, ready)
			if tt.cancel {
				select {
				case err := <-done:
					t.Fatalf("sleep 0 returned early: %v", err)
				case <-time.After(200 * time.Millisecond):
				}
				cancel()
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("sleep returned %v, want nil", err)
				}
			case <-time.After(tt.wantUnder):
				t.Fatalf("sleep did not end within %v", tt.wantUnder)
			}
			if tt.seconds > 0 && time.Since(start) < time.Duration(tt.seconds)*time.Second {
				t.Errorf("sleep ended after %v, want at least %ds", time.Since(start), tt.seconds)
			}
		})
	}
}

func TestRunUDPSubcommand(t *testing.T) {
	port := freePort(t, "udp")
	ready := filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"udp", "--port", strconv.Itoa(port), "--ready-file", ready}, io.Discard, io.Discard)
	}()
	waitFile(t, ready)
	var out stringsBuilder
	if err := run(context.Background(), []string{"udp-send", "127.0.0.1:" + strconv.Itoa(port), "hi"}, &out, io.Discard); err != nil {
		t.Fatalf("udp-send: %v", err)
	}
	if out.String() != "hi\n" {
		t.Errorf("reply = %q, want %q", out.String(), "hi\n")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("udp subcommand returned %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("udp subcommand did not stop within 5s")
	}
}
