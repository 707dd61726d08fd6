//go:build linux

package kubelet

import (
	"context"
	"fmt"
	"net"

	"github.com/vishvananda/netns"
)

// dialNetns connects to addr from inside the named network namespace (the
// socket stays there; the caller uses it from any thread).
func dialNetns(ctx context.Context, name, network, addr string) (net.Conn, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", name, err)
	}
	defer ns.Close()
	var conn net.Conn
	err = inNetns(ns, func() error {
		var d net.Dialer
		var derr error
		conn, derr = d.DialContext(ctx, network, addr)
		return derr
	})
	return conn, err
}
