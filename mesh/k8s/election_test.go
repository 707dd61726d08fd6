package k8s

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/kilofed/kilofed/mesh/topology"
)

func TestLocationLeaseNameIsAValidNameOfItsOwnPerLocation(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	seen := map[string]string{}
	for _, loc := range []string{"aws-euwest3", "AWS-euwest3", "aws_euwest3", "aws.euwest3", "gcp", "europe/paris", "-", strings.Repeat("x", 200), strings.Repeat("x", 201)} {
		n := LocationLeaseName(loc)
		if !strings.HasPrefix(n, LocationLeasePrefix) || len(n) > 63 || !valid.MatchString(n) {
			t.Errorf("LocationLeaseName(%q) = %q: want %s..., a DNS label of at most 63 characters", loc, n, LocationLeasePrefix)
		}
		if other, ok := seen[n]; ok {
			t.Errorf("locations %q and %q share the Lease %q", other, loc, n)
		}
		seen[n] = loc
		if again := LocationLeaseName(loc); again != n {
			t.Errorf("LocationLeaseName(%q) not stable: %q then %q", loc, n, again)
		}
	}
}

func TestParseLeads(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Leads
		bad  bool
	}{
		{in: "0:aws", want: Leads{Term: 0, Location: "aws"}},
		{in: "17:europe:paris", want: Leads{Term: 17, Location: "europe:paris"}},
		{in: "aws", bad: true},
		{in: "-1:aws", bad: true},
		{in: "1:", bad: true},
		{in: "x:aws", bad: true},
		{in: "99999999999:aws", bad: true},
	} {
		got, err := ParseLeads(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrInvalidAnnotation) {
				t.Errorf("ParseLeads(%q) = %v, %v: want an invalid annotation", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseLeads(%q) = %v, %v: want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("Leads %v prints %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestElectedLeaders(t *testing.T) {
	nodes := []topology.Node{
		{Name: "a1", Location: "a"}, {Name: "a2", Location: "a"}, {Name: "a3", Location: "a"},
		{Name: "b1", Location: "b"}, {Name: "b2", Location: "b"},
		{Name: "c1", Location: "c"},
	}
	for _, tc := range []struct {
		name     string
		leads    map[string]string
		want     map[string]string
		problems []string
	}{
		{name: "none", leads: map[string]string{}, want: map[string]string{}},
		{name: "one per location", leads: map[string]string{"a2": "3:a", "b1": "0:b"}, want: map[string]string{"a": "a2", "b": "b1"}},
		{name: "the dead leader's annotation loses to its successor's higher term",
			leads: map[string]string{"a1": "3:a", "a3": "4:a"}, want: map[string]string{"a": "a3"}},
		{name: "equal terms: the first name", leads: map[string]string{"a3": "4:a", "a2": "4:a"}, want: map[string]string{"a": "a2"}},
		{name: "a node leads only its own location", leads: map[string]string{"c1": "9:a", "a1": "1:a"},
			want: map[string]string{"a": "a1"}, problems: []string{"c1"}},
		{name: "unparsable", leads: map[string]string{"b2": "leader"}, want: map[string]string{}, problems: []string{"b2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := electedLeaders(nodes, tc.leads)
			if len(got) != len(tc.want) {
				t.Errorf("leaders %v, want %v", got, tc.want)
			}
			for loc, n := range tc.want {
				if got[loc] != n {
					t.Errorf("leader of %s = %q, want %q (all: %v)", loc, got[loc], n, got)
				}
			}
			var names []string
			for _, p := range problems {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.problems, ",") {
				t.Errorf("problems about %v, want %v (%v)", names, tc.problems, problems)
			}
		})
	}
}

func TestMarkElectedLeavesOnlyTheLeaderReady(t *testing.T) {
	nodes := []topology.Node{
		{Name: "a1", Location: "a", Ready: true}, {Name: "a2", Location: "a", Ready: true},
		{Name: "b1", Location: "b", Ready: true}, {Name: "b2", Location: "b", Ready: false},
	}
	markElected(nodes, map[string]string{"a": "a2", "b": "b2"})
	want := map[string]bool{"a1": false, "a2": true, "b1": false, "b2": false}
	for _, n := range nodes {
		if n.Ready != want[n.Name] {
			t.Errorf("%s Ready = %v, want %v", n.Name, n.Ready, want[n.Name])
		}
	}
	nodes = []topology.Node{{Name: "c1", Location: "c", Ready: true}, {Name: "c2", Location: "c", Ready: true}}
	markElected(nodes, map[string]string{})
	if !nodes[0].Ready || !nodes[1].Ready {
		t.Errorf("a location without leader keeps every node ready: %+v", nodes)
	}
}
