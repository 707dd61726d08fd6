//go:build !linux

package kubelet

import (
	"context"
	"errors"
	"net"
)

// dialNetns needs Linux network namespaces.
func dialNetns(context.Context, string, string, string) (net.Conn, error) {
	return nil, errors.New("network namespaces need Linux")
}
