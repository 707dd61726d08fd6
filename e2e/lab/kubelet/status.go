package kubelet

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// exitInfo describes one finished run of a container.
type exitInfo struct {
	ExitCode   int32
	StartedAt  time.Time
	FinishedAt time.Time
}

// reason returns the Kubernetes reason of a termination.
func (e exitInfo) reason() string {
	if e.ExitCode == 0 {
		return "Completed"
	}
	return "Error"
}

// containerSnapshot is the state of one container at one moment.
type containerSnapshot struct {
	Name, Image  string
	ID           string // container ID of the current or last run
	Running      bool
	StartedAt    time.Time // of the current run, when Running
	Ready        bool      // running and its ports are bound
	RestartCount int32
	// Waiting is set while a container waits to restart (CrashLoopBackOff).
	Waiting        string
	WaitingMessage string
	// Terminated is set when the container ended and will not restart.
	Terminated *exitInfo
	// LastTerminated is the previous run, after a restart.
	LastTerminated *exitInfo
}

// podSnapshot is the state of one pod at one moment.
type podSnapshot struct {
	PodIPs, HostIPs []netip.Addr
	StartTime       time.Time
	Containers      []containerSnapshot
}

// phase returns the pod phase of a snapshot: Pending while no container
// has started yet (each waits with CreateContainerConfigError), Succeeded
// or Failed once every container has terminated for good, else Running.
func (s podSnapshot) phase() corev1.PodPhase {
	if s.neverStarted() {
		return corev1.PodPending
	}
	failed := false
	for _, c := range s.Containers {
		if c.Terminated == nil {
			return corev1.PodRunning
		}
		failed = failed || c.Terminated.ExitCode != 0
	}
	if failed {
		return corev1.PodFailed
	}
	return corev1.PodSucceeded
}

// podStatus returns the status to write for pod: prev (the last status
// written, or the pod's) with the fields the kubelet owns replaced.
func podStatus(pod *corev1.Pod, prev corev1.PodStatus, snap podSnapshot, now metav1.Time) corev1.PodStatus {
	st := *prev.DeepCopy()
	st.Phase = snap.phase()
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	st.Reason, st.Message = "", ""
	st.HostIPs, st.PodIPs = nil, nil
	for _, a := range snap.HostIPs {
		st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: a.String()})
	}
	for _, a := range snap.PodIPs {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: a.String()})
	}
	st.HostIP, st.PodIP = "", ""
	if len(st.HostIPs) > 0 {
		st.HostIP = st.HostIPs[0].IP
	}
	if len(st.PodIPs) > 0 {
		st.PodIP = st.PodIPs[0].IP
	}
	start := metav1.NewTime(snap.StartTime)
	st.StartTime = &start

	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		// Init containers are not run; they are reported as completed.
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), Ready: true, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: start, FinishedAt: start,
			}},
		})
	}
	st.ContainerStatuses = nil
	var unready []string
	for _, c := range snap.Containers {
		cs := containerStatus(c)
		if !cs.Ready {
			unready = append(unready, c.Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}

	ready := condition(corev1.PodReady, corev1.ConditionTrue, "", "")
	switch {
	case terminal:
		ready = condition(corev1.PodReady, corev1.ConditionFalse, "PodCompleted", "")
	case len(unready) > 0:
		ready = condition(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady",
			fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " ")))
	}
	containersReady := ready
	containersReady.Type = corev1.ContainersReady
	sandbox := condition(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", "")
	if terminal {
		sandbox.Status = corev1.ConditionFalse
	}
	want := []corev1.PodCondition{
		sandbox,
		condition(corev1.PodInitialized, corev1.ConditionTrue, "", ""),
		ready,
		containersReady,
		condition(corev1.PodScheduled, corev1.ConditionTrue, "", ""),
	}
	for i := range want {
		want[i].LastTransitionTime = now
		for _, old := range prev.Conditions {
			if old.Type == want[i].Type && old.Status == want[i].Status && !old.LastTransitionTime.IsZero() {
				want[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	for _, old := range prev.Conditions {
		if !slices.ContainsFunc(want, func(c corev1.PodCondition) bool { return c.Type == old.Type }) {
			want = append(want, old) // owned by someone else, e.g. DisruptionTarget
		}
	}
	st.Conditions = want
	return st
}

// condition returns a pod condition without times.
func condition(t corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

// containerStatus converts a container snapshot into its API status.
func containerStatus(c containerSnapshot) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{
		Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: c.ID,
		RestartCount: c.RestartCount,
		Ready:        c.Running && c.Ready,
		Started:      ptr.To(c.Running),
	}
	switch {
	case c.Running:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}
	case c.Terminated != nil:
		cs.State.Terminated = terminated(*c.Terminated, c.ID)
	default:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: c.Waiting, Message: c.WaitingMessage}
	}
	if c.LastTerminated != nil {
		cs.LastTerminationState.Terminated = terminated(*c.LastTerminated, "")
	}
	return cs
}

// terminated converts an exit into its API state.
func terminated(e exitInfo, id string) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{
		ExitCode: e.ExitCode, Reason: e.reason(), ContainerID: id,
		StartedAt: metav1.NewTime(e.StartedAt), FinishedAt: metav1.NewTime(e.FinishedAt),
	}
}

// imageID is the image ID the stand-in reports: it pulls nothing.
func imageID(image string) string {
	return "kilofed-lab://" + image
}

// neverStarted reports whether no container of the pod has run yet: every
// one waits to be created (CreateContainerConfigError) and none ran before.
func (s podSnapshot) neverStarted() bool {
	for _, c := range s.Containers {
		if c.Running || c.Terminated != nil || c.LastTerminated != nil || c.RestartCount > 0 || c.Waiting != "CreateContainerConfigError" {
			return false
		}
	}
	return len(s.Containers) > 0
}
