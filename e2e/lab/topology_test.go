package lab

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/<name>.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); run go test -update if the change is right:\n%s", path, diff)
	}
}

// laidOut returns a lab laid out (no I/O) from spec in slot.
func laidOut(t *testing.T, spec Spec, slot int) *Lab {
	t.Helper()
	full, err := spec.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if err := full.validate(); err != nil {
		t.Fatal(err)
	}
	l := &Lab{Spec: full}
	l.layout(slot)
	return l
}

// twoClusterSpec is the seed's cluster plus a second one with a NAT location.
func twoClusterSpec() Spec {
	return Spec{Name: "gold", Clusters: []ClusterSpec{
		SeedClusterSpec(),
		{Name: "dr", Locations: []LocationSpec{
			{Name: "cloud", Nodes: []NodeSpec{{}, {}}},
			{Name: "office", NAT: true, Nodes: []NodeSpec{{}}},
		}},
	}}
}

func TestRouterRules(t *testing.T) {
	l := laidOut(t, twoClusterSpec(), 0)
	tests := []struct {
		name     string
		cluster  string
		location string
	}{
		{name: "public-cn-beijing", cluster: "c1", location: "cn-beijing"},
		{name: "nat-office", cluster: "dr", location: "office"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden(t, "router-"+tt.name, routerRules(l.Cluster(tt.cluster).Location(tt.location)))
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		slot int
	}{
		{name: "slot0", slot: 0},
		{name: "slot3", slot: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden(t, "describe-"+tt.name, laidOut(t, twoClusterSpec(), tt.slot).Describe())
		})
	}
}

func TestLayoutAddresses(t *testing.T) {
	l := laidOut(t, twoClusterSpec(), 2)
	var got []string
	for _, c := range l.Clusters() {
		got = append(got, c.Name+" api "+c.APIServer)
		for _, n := range c.Nodes() {
			got = append(got, c.Name+"/"+n.Name+" mgmt "+n.MgmtIP.String()+" netns "+n.Netns+" host-link "+mgmtHostLink(l.Spec.Name, n.global))
		}
	}
	want := []string{
		"c1 api https://100.66.1.1:6443",
		"c1/node-beijing mgmt 100.66.1.10 netns kfl-gold-c1-node-beijing host-link kfl-gold-0",
		"c1/node-beijing-2 mgmt 100.66.1.11 netns kfl-gold-c1-node-beijing-2 host-link kfl-gold-1",
		"c1/node-shanghai mgmt 100.66.1.12 netns kfl-gold-c1-node-shanghai host-link kfl-gold-2",
		"c1/node-shanghai-2 mgmt 100.66.1.13 netns kfl-gold-c1-node-shanghai-2 host-link kfl-gold-3",
		"dr api https://100.66.2.1:6443",
		"dr/cloud-1 mgmt 100.66.2.10 netns kfl-gold-dr-cloud-1 host-link kfl-gold-4",
		"dr/cloud-2 mgmt 100.66.2.11 netns kfl-gold-dr-cloud-2 host-link kfl-gold-5",
		"dr/office-1 mgmt 100.66.2.12 netns kfl-gold-dr-office-1 host-link kfl-gold-6",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	var lines []string
	for i := range 100 {
		lines = append(lines, strings.Repeat("x", i%7)+"line")
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		n    int
		want string
	}{
		{name: "last three", n: 3, want: strings.Join(lines[97:], "\n")},
		{name: "more than the file", n: 500, want: strings.Join(lines, "\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tailFile(path, tt.n)); diff != "" {
				t.Errorf("tailFile (-want +got):\n%s", diff)
			}
		})
	}
	if got := tailFile(filepath.Join(t.TempDir(), "missing"), 3); !strings.HasPrefix(got, "(no log") {
		t.Errorf("tail of a missing file = %q", got)
	}
}
