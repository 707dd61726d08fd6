package merge

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExportConditions(t *testing.T) {
	type cond struct{ Type, Status, Reason string }
	for _, tc := range []struct {
		name  string
		state ExportState
		want  []cond
	}{
		{
			name:  "no Service",
			state: ExportState{},
			want:  []cond{{"Valid", "False", "NoService"}, {"Ready", "False", "Pending"}, {"Conflict", "False", "NoConflicts"}},
		},
		{
			name:  "an ExternalName Service cannot be exported",
			state: ExportState{ServiceType: ptrType(corev1.ServiceTypeExternalName)},
			want:  []cond{{"Valid", "False", "InvalidServiceType"}, {"Ready", "False", "Pending"}, {"Conflict", "False", "NoConflicts"}},
		},
		{
			name:  "valid, published, not yet imported here",
			state: ExportState{ServiceType: ptrType(corev1.ServiceTypeClusterIP), Published: true},
			want:  []cond{{"Valid", "True", "Valid"}, {"Ready", "False", "Pending"}, {"Conflict", "False", "NoConflicts"}},
		},
		{
			name:  "valid, published and imported",
			state: ExportState{ServiceType: ptrType(corev1.ServiceTypeClusterIP), Published: true, Imported: true},
			want:  []cond{{"Valid", "True", "Valid"}, {"Ready", "True", "Ready"}, {"Conflict", "False", "NoConflicts"}},
		},
		{
			name:  "conflicting: the reasons joined with commas",
			state: ExportState{ServiceType: ptrType(corev1.ServiceTypeClusterIP), Published: true, Imported: true, Conflict: Conflict{Reasons: []string{"PortConflict", "TypeConflict"}, Message: "m"}},
			want:  []cond{{"Valid", "True", "Valid"}, {"Ready", "True", "Ready"}, {"Conflict", "True", "PortConflict,TypeConflict"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []cond
			for _, c := range ExportConditions(tc.state) {
				got = append(got, cond{c.Type, string(c.Status), c.Reason})
				if c.Message == "" {
					t.Errorf("condition %s without message", c.Type)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("conditions (-want +got):\n%s", d)
			}
		})
	}
}

func ptrType(t corev1.ServiceType) *corev1.ServiceType { return &t }

// TestKeep drives the withdrawal rule with a fake clock: a remote whose API
// does not answer keeps its endpoints while its tunnels handshake, and
// loses them once the latest handshake is older than the bound.
func TestKeep(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(-ago)); return &m }
	for _, tc := range []struct {
		name      string
		answering bool
		handshake *metav1.Time
		want      bool
	}{
		{"API answering, no tunnel yet", true, nil, true},
		{"API answering, old handshake", true, at(time.Hour), true},
		{"API down, handshake just now", false, at(time.Second), true},
		{"API down, handshake just inside the bound", false, at(WithdrawAfter - time.Second), true},
		{"API down, handshake at the bound", false, at(WithdrawAfter), false},
		{"API down, handshake past the bound", false, at(WithdrawAfter + time.Minute), false},
		{"API down, never a handshake", false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Keep(tc.answering, tc.handshake, now, WithdrawAfter); got != tc.want {
				t.Errorf("Keep = %v, want %v", got, tc.want)
			}
		})
	}
}
