//go:build linux

package lab

import (
	"fmt"
	"net"
	"strconv"
)

// freePort hands out the next port of the lab's block that nothing listens
// on (see portBlock). A port is handed out once per lab: a component that
// restarts keeps its port.
func (l *Lab) freePort() (int, error) {
	first, end, err := portBlock(l.slot)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.nextPort < end-first {
		port := first + l.nextPort
		l.nextPort++
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // something else of the machine listens there
		}
		ln.Close()
		return port, nil
	}
	return 0, fmt.Errorf("lab %s has used all %d ports of slot %d (%d-%d): too many clusters in one lab", l.Spec.Name, portsPerSlot, l.slot, first, end-1)
}
