package workload

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startHTTP serves the echo handler on 127.0.0.1:0 and returns its address.
func startHTTP(t *testing.T, id identity) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveHTTP(ctx, []net.Listener{ln}, id, discardLogger()) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serveHTTP returned %v after cancel, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("serveHTTP did not stop within 5s of cancel")
		}
	})
	return ln.Addr().String()
}

func TestHTTPEcho(t *testing.T) {
	addr := startHTTP(t, identity{Pod: "ml-inference-0", Namespace: "gpu", Cluster: "gpu-cluster", Node: "node-gpu-1"})
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantBody   string
	}{
		{name: "root", path: "/", wantStatus: 200, wantBody: "ml-inference-0 gpu-cluster node-gpu-1\n"},
		{name: "any path", path: "/v1/models/resnet:predict", wantStatus: 200, wantBody: "ml-inference-0 gpu-cluster node-gpu-1\n"},
		{name: "healthz", path: "/healthz", wantStatus: 200, wantBody: "ok\n"},
		{name: "healthz switched to failing", path: "/healthz/fail", wantStatus: 200, wantBody: "ok\n"},
		{name: "healthz failing", path: "/healthz", wantStatus: 503, wantBody: "unready\n"},
		{name: "other paths still answer", path: "/", wantStatus: 200, wantBody: "ml-inference-0 gpu-cluster node-gpu-1\n"},
		{name: "healthz switched back", path: "/healthz/pass", wantStatus: 200, wantBody: "ok\n"},
		{name: "healthz passing again", path: "/healthz", wantStatus: 200, wantBody: "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get("http://" + addr + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantBody, string(body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// freePort returns a TCP port that was free a moment ago on 127.0.0.1.
func freePort(t *testing.T, network string) int {
	t.Helper()
	var addr net.Addr
	switch network {
	case "udp":
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = c.LocalAddr()
		c.Close()
	default:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr()
		ln.Close()
	}
	_, p, _ := net.SplitHostPort(addr.String())
	n, _ := strconv.Atoi(p)
	return n
}

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s was not created within 5s", path)
}

// TestRunHTTPSubcommand runs the whole http subcommand, flags and env included.
func TestRunHTTPSubcommand(t *testing.T) {
	t.Setenv("KFL_CLUSTER", "from-env")
	port := freePort(t, "tcp")
	ready := filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"http", "--port", strconv.Itoa(port), "--name", "web-1", "--node", "node-a", "--ready-file", ready}, io.Discard, io.Discard)
	}()
	waitFile(t, ready)
	var out stringsBuilder
	if err := run(context.Background(), []string{"get", "http://127.0.0.1:" + strconv.Itoa(port) + "/"}, &out, io.Discard); err != nil {
		t.Fatalf("get: %v", err)
	}
	if diff := cmp.Diff("web-1 from-env node-a\n", out.String()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("http subcommand returned %v after cancel, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("http subcommand did not stop within 5s")
	}
}
