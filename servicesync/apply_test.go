package servicesync

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	ssv1 "github.com/kilofed/kilofed/servicesync/apis/v1alpha1"
	"github.com/kilofed/kilofed/servicesync/merge"
)

func TestImportStatus(t *testing.T) {
	imp := &merge.Import{Namespace: "default", Name: "echo", Type: ssv1.ClusterSetIP, Clusters: []string{"dr", "prod"}}
	for _, tc := range []struct {
		name          string
		res           merge.Result
		ips           []string
		ready, accept string
		slices        mcsv1beta1.EndpointSliceObjectsStatus
		msg           string
	}{
		{name: "IP and slices", res: merge.Result{Import: imp, Slices: []merge.Slice{{Cluster: "dr"}}}, ips: []string{"10.20.0.9"},
			ready: "True/Ready", accept: "True/InRange", slices: mcsv1beta1.EndpointSliceObjectsPresent},
		{name: "no IP yet", res: merge.Result{Import: imp}, ready: "False/Pending", accept: "True/InRange", slices: mcsv1beta1.EndpointSliceObjectsAbsent},
		{name: "refused addresses are named", res: merge.Result{Import: imp, Refused: []merge.Refusal{{Cluster: "dr", Address: "10.10.1.5", Why: "outside"}}}, ips: []string{"10.20.0.9"},
			ready: "True/Ready", accept: "False/Refused", slices: mcsv1beta1.EndpointSliceObjectsAbsent, msg: "10.10.1.5 from dr: outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := importStatus(tc.res, nil, tc.ips, "derived-echo")
			get := func(typ string) (string, string) {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil {
					return "absent", ""
				}
				return string(c.Status) + "/" + c.Reason, c.Message
			}
			if got, _ := get("Ready"); got != tc.ready {
				t.Errorf("Ready %s, want %s", got, tc.ready)
			}
			if got, msg := get(ConditionEndpointsAccepted); got != tc.accept || !strings.Contains(msg, tc.msg) {
				t.Errorf("%s %s %q, want %s naming %q", ConditionEndpointsAccepted, got, msg, tc.accept, tc.msg)
			}
			if st.EndpointSliceObjects != tc.slices || len(st.Clusters) != 2 || st.Clusters[0].Cluster != "dr" {
				t.Errorf("endpointSliceObjects %s clusters %v", st.EndpointSliceObjects, st.Clusters)
			}
		})
	}
	// A condition's transition time is kept while its status holds.
	old := importStatus(merge.Result{Import: imp}, nil, []string{"10.20.0.9"}, "derived-echo").Conditions
	old[0].LastTransitionTime = metav1.Unix(1, 0)
	again := importStatus(merge.Result{Import: imp}, old, []string{"10.20.0.9"}, "derived-echo")
	if c := meta.FindStatusCondition(again.Conditions, old[0].Type); c == nil || !c.LastTransitionTime.Equal(&old[0].LastTransitionTime) {
		t.Errorf("the transition time of %s was not kept: %v", old[0].Type, c)
	}
}

func TestDerivedNameFitsALabel(t *testing.T) {
	if got := DerivedName("echo"); got != "derived-echo" {
		t.Errorf("DerivedName(echo) = %q", got)
	}
	long := strings.Repeat("a", 63)
	if got := DerivedName(long); len(got) > 63 || got == DerivedName(long[:62]+"b") {
		t.Errorf("DerivedName of a 63-character name = %q (%d), not unique or too long", got, len(got))
	}
}
