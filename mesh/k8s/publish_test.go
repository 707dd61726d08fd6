package k8s

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilofed/kilofed/mesh/topology"
)

func TestNodeAnnotationsValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   NodeAnnotations
		want map[string]string
		err  bool
	}{
		{
			name: "zero value removes everything",
			want: map[string]string{KeyAnnotation: "", EndpointAnnotation: "", InternalIPAnnotation: "", WireGuardIPAnnotation: "", GranularityAnnotation: "", KeyRotatedAnnotation: ""},
		},
		{
			name: "leader of a dual-stack node",
			in: NodeAnnotations{Key: mustKey(keyA), Endpoint: "gw.example.com:51820", InternalIP: pfx("10.0.1.10/24"), InternalIP6: pfx("fd12::10/64"),
				WireGuardIP: pfx("10.4.0.1/16"), Granularity: topology.LocationGranularity},
			want: map[string]string{KeyAnnotation: keyA, EndpointAnnotation: "gw.example.com:51820", InternalIPAnnotation: "10.0.1.10/24,fd12::10/64",
				WireGuardIPAnnotation: "10.4.0.1/16", GranularityAnnotation: "location", KeyRotatedAnnotation: ""},
		},
		{
			name: "port only",
			in:   NodeAnnotations{Key: mustKey(keyA), Endpoint: ":51821", InternalIP: pfx("10.0.1.10/24")},
			want: map[string]string{KeyAnnotation: keyA, EndpointAnnotation: ":51821", InternalIPAnnotation: "10.0.1.10/24", WireGuardIPAnnotation: "", GranularityAnnotation: "", KeyRotatedAnnotation: ""},
		},
		{
			name: "after a rotation",
			in:   NodeAnnotations{Key: mustKey(keyA), KeyRotated: "2026-12-01T10:00:00.123456789Z"},
			want: map[string]string{KeyAnnotation: keyA, EndpointAnnotation: "", InternalIPAnnotation: "", WireGuardIPAnnotation: "", GranularityAnnotation: "",
				KeyRotatedAnnotation: "2026-12-01T10:00:00.123456789Z"},
		},
		{name: "bad endpoint", in: NodeAnnotations{Endpoint: "gw.example.com"}, err: true},
		{name: "port zero", in: NodeAnnotations{Endpoint: ":0"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.Values()
			if tc.err {
				if !errors.Is(err, ErrInvalidAnnotation) {
					t.Errorf("Values() error = %v, want ErrInvalidAnnotation", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Values() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPublishedReadBack checks that what an agent publishes reads back as
// the same node through NodeFromObject.
func TestPublishedReadBack(t *testing.T) {
	in := NodeAnnotations{Key: mustKey(keyA), Endpoint: ":51821", InternalIP: pfx("10.0.1.10/24"), InternalIP6: pfx("fd12::10/64"), WireGuardIP: pfx("10.4.0.1/16")}
	v, err := in.Values()
	if err != nil {
		t.Fatal(err)
	}
	n := nodeSpec{annotations: v, addrs: []string{"InternalIP=10.0.1.10", "ExternalIP=203.0.113.9"}}.build("n")
	got, errs := NodeFromObject(n, ParseOptions{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := topology.Node{Name: "n", Key: in.Key, InternalIP: in.InternalIP, InternalIP6: in.InternalIP6, WireGuardIP: in.WireGuardIP,
		ExternalIP: netip.MustParseAddr("203.0.113.9"), Endpoint: ep("203.0.113.9", 51821), Ready: true}
	if diff := cmp.Diff(want, got, netipCmp); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}

func TestAnnotationPatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current map[string]string
		want    map[string]string
		patch   string
	}{
		{name: "nothing to do", current: map[string]string{KeyAnnotation: keyA, "other": "x"}, want: map[string]string{KeyAnnotation: keyA, WireGuardIPAnnotation: ""}},
		{name: "new node", current: nil, want: map[string]string{KeyAnnotation: keyA, WireGuardIPAnnotation: ""},
			patch: `{"metadata":{"annotations":{"kilo.squat.ai/key":"` + keyA + `"}}}`},
		{name: "change and remove, others untouched", current: map[string]string{KeyAnnotation: keyB, WireGuardIPAnnotation: "10.4.0.1/16", "other": "x"},
			want:  map[string]string{KeyAnnotation: keyA, WireGuardIPAnnotation: ""},
			patch: `{"metadata":{"annotations":{"kilo.squat.ai/key":"` + keyA + `","kilo.squat.ai/wireguard-ip":null}}}`},
		{name: "empty annotation present is removed", current: map[string]string{EndpointAnnotation: ""}, want: map[string]string{EndpointAnnotation: ""},
			patch: `{"metadata":{"annotations":{"kilo.squat.ai/endpoint":null}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(annotationPatch(tc.current, tc.want)); got != tc.patch {
				t.Errorf("annotationPatch = %s, want %s", got, tc.patch)
			}
		})
	}
}
