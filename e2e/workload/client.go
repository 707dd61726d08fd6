package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// ErrStatus is returned (wrapped) by get when the server answers with a
// status outside 2xx.
var ErrStatus = errors.New("non-2xx status")

// runGet fetches a URL and prints its body.
func runGet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("get")
	timeout := fs.Duration("timeout", 5*time.Second, "whole request timeout")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: get takes exactly one URL, got %d arguments\n%s", ErrUsage, len(pos), usage)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pos[0], nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", pos[0], err)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", pos[0], err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("get %s: read body: %w", pos[0], err)
	}
	if _, err := stdout.Write(body); err != nil {
		return fmt.Errorf("get %s: print body: %w", pos[0], err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("get %s: %w: %s", pos[0], ErrStatus, resp.Status)
	}
	return nil
}

// runUDPSend sends one datagram and prints the first reply.
func runUDPSend(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("udp-send")
	timeout := fs.Duration("timeout", 5*time.Second, "time to wait for the reply")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return fmt.Errorf("%w: udp-send takes ADDR and MESSAGE, got %d arguments\n%s", ErrUsage, len(pos), usage)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", pos[0])
	if err != nil {
		return fmt.Errorf("udp-send %s: %w", pos[0], err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte(pos[1])); err != nil {
		return fmt.Errorf("udp-send %s: send: %w", pos[0], err)
	}
	buf := make([]byte, 64*1024)
	n, err := conn.Read(buf)
	if err != nil {
		return fmt.Errorf("udp-send %s: no reply: %w", pos[0], err)
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", buf[:n]); err != nil {
		return fmt.Errorf("udp-send %s: print reply: %w", pos[0], err)
	}
	return nil
}
