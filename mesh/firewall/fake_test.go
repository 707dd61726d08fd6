package firewall

import (
	"context"
	"errors"
	"github.com/kilofed/kilofed/mesh/golden"
	"net/netip"
	"testing"
)

func TestFakeRecord(t *testing.T) {
	ctx := context.Background()
	f := &Fake{}
	rules := Rules{
		Forward:    []Forward{{Link: "kilo0", Range: pfx("10.2.0.0/24")}},
		Masquerade: []Masquerade{{Src: pfx("10.1.0.0/24"), Except: []netip.Prefix{pfx("10.0.0.0/8")}}},
		AcceptUDP:  []uint16{51820},
	}
	if err := f.Set(ctx, rules); err != nil {
		t.Fatal(err)
	}
	if err := f.Set(ctx, Rules{Forward: []Forward{{}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Set(invalid) = %v, want ErrInvalid", err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "fake.golden", f.Record())
}
