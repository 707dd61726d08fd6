package merge

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExportState is what the conditions of a local ServiceExport depend on.
type ExportState struct {
	// ServiceType is the type of the Service of the same name; nil when
	// there is none.
	ServiceType *corev1.ServiceType
	// Published reports whether the export is published (its
	// ExportedService written).
	Published bool
	// Imported reports whether this cluster's ServiceImport includes it.
	Imported bool
	// Conflict is the export's conflict with the other exports.
	Conflict Conflict
}

// Valid reports whether the state's Service may be exported.
func (s ExportState) Valid() bool {
	return s.ServiceType != nil && *s.ServiceType != corev1.ServiceTypeExternalName
}

// ExportConditions returns the Valid, Ready and Conflict conditions of a
// ServiceExport, with the mcs-api's reasons (without transition times:
// meta.SetStatusCondition keeps those).
func ExportConditions(s ExportState) []metav1.Condition {
	c := func(t string, ok bool, reason, msg string) metav1.Condition {
		st := metav1.ConditionFalse
		if ok {
			st = metav1.ConditionTrue
		}
		return metav1.Condition{Type: t, Status: st, Reason: reason, Message: msg}
	}
	var out []metav1.Condition
	switch {
	case s.ServiceType == nil:
		out = append(out, c("Valid", false, "NoService", "no Service of the same name in this namespace: create it, the export follows"))
	case *s.ServiceType == corev1.ServiceTypeExternalName:
		out = append(out, c("Valid", false, "InvalidServiceType", "an ExternalName Service cannot be exported"))
	default:
		out = append(out, c("Valid", true, "Valid", "the Service is exported"))
	}
	switch {
	case s.Valid() && s.Published && s.Imported:
		out = append(out, c("Ready", true, "Ready", "published for the joined clusters, which read it, and imported in this cluster"))
	case s.Valid() && s.Published:
		out = append(out, c("Ready", false, "Pending", "published; not yet imported in this cluster"))
	default:
		out = append(out, c("Ready", false, "Pending", "not published: the export is not valid"))
	}
	if len(s.Conflict.Reasons) > 0 {
		out = append(out, c("Conflict", true, strings.Join(s.Conflict.Reasons, ","), s.Conflict.Message))
	} else {
		out = append(out, c("Conflict", false, "NoConflicts", "no conflict with the other clusters' exports"))
	}
	return out
}

// WithdrawAfter is how old the latest handshake with a remote's gateways
// may be, while its API server does not answer, before its endpoints are
// withdrawn: WireGuard renews a session every 2 minutes while it carries
// traffic (the mirrored Peers' 25 s keepalive keeps it used), so no
// handshake for 3 minutes means the tunnels are down. It is the
// federation's TunnelFresh.
const WithdrawAfter = 3 * time.Minute

// Keep reports whether a remote's endpoints, as last read, stay imported
// at now: always while its API answers (what was read is current); while it
// does not, only as long as its tunnels' latest handshake is less than
// bound old (an API outage is not a data-plane outage).
func Keep(answering bool, latestHandshake *metav1.Time, now time.Time, bound time.Duration) bool {
	if answering {
		return true
	}
	return latestHandshake != nil && now.Sub(latestHandshake.Time) < bound
}
