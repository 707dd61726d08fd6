package ranges

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func pfx(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// prod and dr are the seed's two clusters: production and the DR cluster
// with pods 10.11/16 and services 10.21/16.
var (
	prod = Cluster{ID: "prod", Pods: pfx("10.10.0.0/16"), Services: pfx("10.20.0.0/16"), WireGuard: netip.MustParsePrefix("10.4.0.0/16")}
	dr   = Cluster{ID: "dr", Pods: pfx("10.11.0.0/16"), Services: pfx("10.21.0.0/16"), WireGuard: netip.MustParsePrefix("10.5.0.0/16")}
)

func TestCheckNamesBothRangesOfEveryOverlap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		clusters []Cluster
		want     []string // Error() of each conflict, in order
	}{
		{name: "disjoint seed clusters", clusters: []Cluster{prod, dr}},
		{
			name:     "pod range inside the other's pod range",
			clusters: []Cluster{prod, {ID: "b", Pods: pfx("10.10.5.0/24")}},
			want:     []string{"b's pod range 10.10.5.0/24 overlaps prod's pod range 10.10.0.0/16"},
		},
		{
			name:     "wider range containing the other's (overlap, not containment)",
			clusters: []Cluster{prod, {ID: "b", Pods: pfx("10.0.0.0/8")}},
			want: []string{
				"b's pod range 10.0.0.0/8 overlaps prod's pod range 10.10.0.0/16",
				"b's pod range 10.0.0.0/8 overlaps prod's service range 10.20.0.0/16",
				"b's pod range 10.0.0.0/8 overlaps prod's WireGuard range 10.4.0.0/16",
			},
		},
		{
			name:     "service range against WireGuard subnet",
			clusters: []Cluster{prod, {ID: "b", Services: pfx("10.4.128.0/17")}},
			want:     []string{"b's service range 10.4.128.0/17 overlaps prod's WireGuard range 10.4.0.0/16"},
		},
		{
			name:     "same WireGuard subnet (the default of both)",
			clusters: []Cluster{{ID: "a", WireGuard: netip.MustParsePrefix("10.4.0.0/16")}, {ID: "b", WireGuard: netip.MustParsePrefix("10.4.0.0/16")}},
			want:     []string{"b's WireGuard range 10.4.0.0/16 overlaps a's WireGuard range 10.4.0.0/16"},
		},
		{
			name:     "a third cluster overlapping the first",
			clusters: []Cluster{prod, dr, {ID: "c", Pods: pfx("10.11.128.0/17")}},
			want:     []string{"c's pod range 10.11.128.0/17 overlaps dr's pod range 10.11.0.0/16"},
		},
		{
			name:     "clashing IDs",
			clusters: []Cluster{prod, {ID: "prod", Pods: pfx("10.30.0.0/16")}},
			want:     []string{`two clusters have the ID "prod"`},
		},
		{
			name:     "loopback announced",
			clusters: []Cluster{{ID: "a", Pods: pfx("127.0.0.0/16")}},
			want:     []string{"a's pod range 127.0.0.0/16 is loopback"},
		},
		{
			name:     "IPv6 ranges overlap too",
			clusters: []Cluster{{ID: "a", Pods: pfx("2001:db8:1::/48")}, {ID: "b", Pods: pfx("2001:db8:1:2::/64")}},
			want:     []string{"b's pod range 2001:db8:1:2::/64 overlaps a's pod range 2001:db8:1::/48"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.clusters)
			if len(got) != len(tc.want) {
				t.Fatalf("Check returned %d conflicts, want %d: %v", len(got), len(tc.want), got)
			}
			for i, c := range got {
				if !strings.HasPrefix(c.Error(), tc.want[i]) {
					t.Errorf("conflict %d:\n got %s\nwant prefix %s", i, c.Error(), tc.want[i])
				}
			}
		})
	}
}

func TestCheckIsSymmetric(t *testing.T) {
	b := Cluster{ID: "b", Pods: pfx("10.10.5.0/24", "10.50.0.0/16"), Services: pfx("10.4.0.0/24")}
	count := func(cs []Conflict) int { return len(cs) }
	if ab, ba := count(Check([]Cluster{prod, b})), count(Check([]Cluster{b, prod})); ab != ba || ab != 2 {
		t.Fatalf("Check(prod, b) found %d conflicts and Check(b, prod) %d, want 2 both ways", ab, ba)
	}
}

func TestAcceptLeavesOutOnlyTheConflictingRanges(t *testing.T) {
	remote := Cluster{ID: "dr", Pods: pfx("10.11.0.0/16", "10.10.7.0/24"), Services: pfx("10.21.0.0/16"), WireGuard: netip.MustParsePrefix("169.254.0.0/16")}
	other := Cluster{ID: "c", Services: pfx("10.21.128.0/17")}
	accepted, conflicts := Accept(remote, prod, []Cluster{other, remote})
	want := []Range{{Cluster: "dr", Kind: Pods, Prefix: netip.MustParsePrefix("10.11.0.0/16")}}
	if d := cmp.Diff(want, accepted, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("accepted (-want +got):\n%s", d)
	}
	var got []string
	for _, c := range conflicts {
		got = append(got, c.Range.Prefix.String()+" "+c.With.Cluster+c.Reserved)
	}
	wantC := []string{"10.10.7.0/24 prod", "10.21.0.0/16 c", "169.254.0.0/16 link-local (169.254.0.0/16)"}
	if d := cmp.Diff(wantC, got); d != "" {
		t.Errorf("conflicts (-want +got):\n%s", d)
	}
}

func TestAllowedOnlyInsideAcceptedRanges(t *testing.T) {
	acc := []Range{{Cluster: "dr", Kind: Pods, Prefix: netip.MustParsePrefix("10.11.0.0/16")}}
	for _, tc := range []struct {
		p    string
		want bool
	}{
		{"10.11.3.0/24", true},
		{"10.11.0.0/16", true},
		{"10.11.0.7/32", true},
		{"10.0.0.0/8", false}, // wider than what was accepted
		{"10.12.0.0/24", false},
	} {
		if got := Allowed(netip.MustParsePrefix(tc.p), acc); got != tc.want {
			t.Errorf("Allowed(%s) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func TestReservedRefusesTooWideRanges(t *testing.T) {
	for _, tc := range []struct {
		p    string
		want bool
	}{
		{"0.0.0.0/0", true}, {"10.0.0.0/7", true}, {"10.0.0.0/8", false},
		{"::/0", true}, {"2001:db8::/32", false}, {"fe80::/64", true}, {"224.1.0.0/16", true},
	} {
		if got := Reserved(netip.MustParsePrefix(tc.p)) != ""; got != tc.want {
			t.Errorf("Reserved(%s) refused=%v, want %v", tc.p, got, tc.want)
		}
	}
}

// TestConflictOfTwoKindsSaysWhichRangeToChangeWhere: when a WireGuard
// subnet overlaps a pod range, the fix names each cluster with its own kind.
func TestConflictOfTwoKindsSaysWhichRangeToChangeWhere(t *testing.T) {
	c := Conflict{
		Range: Range{Cluster: "dr", Kind: WireGuard, Prefix: netip.MustParsePrefix("10.6.0.0/16")},
		With:  Range{Cluster: "prod", Kind: Pods, Prefix: netip.MustParsePrefix("10.6.0.0/16")},
	}
	want := "give dr another WireGuard range or prod another pod range"
	if !strings.Contains(c.Error(), want) {
		t.Errorf("Error() = %q, want it to say %q", c.Error(), want)
	}
}
