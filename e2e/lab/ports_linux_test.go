//go:build linux

package lab

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortSkipsAPortInUseAndNeverRepeats: a port something else listens
// on is not handed out, nor is one handed out before.
func TestFreePortSkipsAPortInUseAndNeverRepeats(t *testing.T) {
	l := &Lab{Spec: Spec{Name: "ports"}, slot: maxSlots - 1}
	first, _, err := portBlock(l.slot)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first)))
	if err != nil {
		t.Skipf("port %d is taken on this machine: %v", first, err)
	}
	defer ln.Close()
	seen := map[int]bool{}
	for range 5 {
		p, err := l.freePort()
		if err != nil {
			t.Fatal(err)
		}
		if p == first {
			t.Errorf("freePort handed out %d, where a listener is", p)
		}
		if seen[p] {
			t.Errorf("freePort handed out %d twice", p)
		}
		seen[p] = true
	}
}

// TestFreePortSaysWhenTheBlockIsUsedUp: a lab with too many clusters gets
// an error naming the block, not a port of another slot.
func TestFreePortSaysWhenTheBlockIsUsedUp(t *testing.T) {
	l := &Lab{Spec: Spec{Name: "ports"}, slot: maxSlots - 1, nextPort: portsPerSlot}
	if p, err := l.freePort(); err == nil {
		t.Fatalf("freePort = %d, want an error once the block is used up", p)
	}
}
