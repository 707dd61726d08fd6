package workload

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// startUDP serves the UDP echo on 127.0.0.1:0 and returns its address.
func startUDP(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUDP(ctx, []net.PacketConn{c}, discardLogger()) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serveUDP returned %v after cancel, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("serveUDP did not stop within 5s of cancel")
		}
	})
	return c.LocalAddr().String()
}

func TestUDPEcho(t *testing.T) {
	addr := startUDP(t)
	tests := []struct {
		name    string
		payload []byte
	}{
		{name: "text", payload: []byte("hello from beijing")},
		{name: "binary", payload: []byte{0, 1, 2, 255, 254}},
		{name: "large", payload: make([]byte, 8000)},
	}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write(tt.payload); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 65536)
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.payload, buf[:n]); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}
