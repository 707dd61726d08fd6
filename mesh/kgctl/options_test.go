package kgctl

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology"
)

func TestMeshFlagsOptions(t *testing.T) {
	// with returns the seed snapshot changed by f.
	with := func(f func(*Snapshot)) Snapshot {
		s := seedSnapshot()
		f(&s)
		return s
	}
	tests := []struct {
		name      string
		flags     MeshFlags
		snap      Snapshot
		want      topology.Options
		wantNotes []string
		wantErr   string // substring; ErrAgentsDisagree is expected when set
	}{{
		name: "inferred from the agents",
		snap: seedSnapshot(),
		want: topology.Options{Subnet: pfx("10.5.0.0/16"), Granularity: "location", Encapsulate: "always"},
		wantNotes: []string{
			"subnet 10.5.0.0/16 inferred from the kilo.squat.ai/wireguard-ip of node-beijing, node-shanghai",
			"granularity location inferred from the kilo.squat.ai/granularity of node-beijing, node-shanghai",
		},
	}, {
		name: "nothing published yet: the agents' defaults",
		snap: with(func(s *Snapshot) {
			s.Granularities = nil
			for i := range s.Nodes {
				s.Nodes[i].WireGuardIP = netip.Prefix{}
			}
		}),
		want: topology.Options{Encapsulate: "always"},
	}, {
		name:  "flags win",
		flags: MeshFlags{Subnet: pfx("10.5.0.0/16"), Granularity: "location", Port: 51821, Encapsulate: "never", ServiceCIDRs: []netip.Prefix{pfx("10.96.0.0/12")}},
		snap:  seedSnapshot(),
		want: topology.Options{Subnet: pfx("10.5.0.0/16"), Granularity: "location", Port: 51821, Encapsulate: "never",
			ServiceCIDRs: []netip.Prefix{pfx("10.96.0.0/12")}},
	}, {
		name: "agents disagree on the subnet",
		snap: with(func(s *Snapshot) { s.Nodes[1].WireGuardIP = pfx("10.6.0.2/16") }),
		wantErr: "the agents disagree on the WireGuard subnet (kilo.squat.ai/wireguard-ip): " +
			"10.5.0.0/16 on node-beijing; 10.6.0.0/16 on node-shanghai; pass --subnet",
	}, {
		name: "agents disagree on the granularity",
		snap: with(func(s *Snapshot) { s.Granularities["node-shanghai"] = "full" }),
		wantErr: "the agents disagree on the mesh granularity (kilo.squat.ai/granularity): " +
			"full on node-shanghai; location on node-beijing; pass --mesh-granularity",
	}, {
		name:  "a flag settles a disagreement, with a warning",
		flags: MeshFlags{Granularity: "full"},
		snap:  with(func(s *Snapshot) { s.Granularities["node-shanghai"] = "full" }),
		want:  topology.Options{Subnet: pfx("10.5.0.0/16"), Granularity: "full", Encapsulate: "always"},
		wantNotes: []string{
			"subnet 10.5.0.0/16 inferred from the kilo.squat.ai/wireguard-ip of node-beijing, node-shanghai",
			"warning: --mesh-granularity full differs from the agents' granularity: location on node-beijing",
		},
	}, {
		name:  "a flag contradicts all agents",
		flags: MeshFlags{Subnet: pfx("10.4.0.0/16")},
		snap:  seedSnapshot(),
		want:  topology.Options{Subnet: pfx("10.4.0.0/16"), Granularity: "location", Encapsulate: "always"},
		wantNotes: []string{
			"warning: --subnet 10.4.0.0/16 differs from the agents' WireGuard subnet: 10.5.0.0/16 on node-beijing, node-shanghai",
			"granularity location inferred from the kilo.squat.ai/granularity of node-beijing, node-shanghai",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, notes, err := tt.flags.Options(tt.snap)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrAgentsDisagree) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want ErrAgentsDisagree containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNotes, notes); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDisagreementCommand checks that the commands report disagreeing
// agents and that a flag lets them run anyway.
func TestDisagreementCommand(t *testing.T) {
	s := seedSnapshot()
	s.Nodes[0].WireGuardIP = pfx("10.4.0.1/16")
	_, stderr, code := run(t, NewFakeSource(s), "graph")
	if code != 1 || !strings.Contains(stderr, "10.4.0.0/16 on node-beijing; 10.5.0.0/16 on node-shanghai; pass --subnet") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	stdout, stderr, code := run(t, NewFakeSource(s), "graph", "--subnet", "10.5.0.0/16")
	if code != 0 || !strings.Contains(stdout, "kilofed mesh 10.5.0.0/16") ||
		!strings.Contains(stderr, "warning: --subnet 10.5.0.0/16 differs from the agents' WireGuard subnet: 10.4.0.0/16 on node-beijing") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
