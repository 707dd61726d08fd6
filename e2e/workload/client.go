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

// runGet fetches a URL and prints its body, or with --discard reads the
// body to io.Discard and prints how many bytes came and how fast.
func runGet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("get")
	timeout := fs.Duration("timeout", 5*time.Second, "whole request timeout")
	discard := fs.Bool("discard", false, "discard the body and print bytes=N seconds=S mbps=M")
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
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true}}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", pos[0], err)
	}
	defer resp.Body.Close()
	if *discard {
		err = discardBody(resp.Body, start, stdout)
	} else {
		err = printBody(resp.Body, stdout)
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", pos[0], err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("get %s: %w: %s", pos[0], ErrStatus, resp.Status)
	}
	return nil
}

// printBody copies the whole body to stdout.
func printBody(body io.Reader, stdout io.Writer) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if _, err := stdout.Write(b); err != nil {
		return fmt.Errorf("print body: %w", err)
	}
	return nil
}

// discardBody reads the body to its end and prints one line: the bytes
// read, the seconds since start (the request was sent) and the throughput
// in megabits (10^6 bits) per second.
func discardBody(body io.Reader, start time.Time, stdout io.Writer) error {
	n, err := io.Copy(io.Discard, body)
	secs := time.Since(start).Seconds()
	if err != nil {
		return fmt.Errorf("read body (%d bytes in %.3fs): %w", n, secs, err)
	}
	if _, err := fmt.Fprintf(stdout, "bytes=%d seconds=%.6f mbps=%.3f\n", n, secs, float64(n)*8/secs/1e6); err != nil {
		return fmt.Errorf("print transfer line: %w", err)
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
