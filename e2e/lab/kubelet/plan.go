package kubelet

import (
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// workloadKind names a built-in workload (a workload.Main subcommand).
type workloadKind string

const (
	kindHTTP  workloadKind = "http"
	kindUDP   workloadKind = "udp"
	kindSleep workloadKind = "sleep"
)

// Default ports when the pod spec gives none.
const (
	defaultHTTPPort = 8080
	defaultUDPPort  = 9090
)

// workloadPlan is what runs in place of one container.
type workloadPlan struct {
	Kind    workloadKind
	Ports   []int32 // http, udp
	Seconds int64   // sleep; 0 = forever
}

// podIdentity is what a workload is told about its pod.
type podIdentity struct {
	Pod, Namespace, Cluster, Node string
}

// planFor chooses the workload of a container from its image, command and
// ports (the table is in doc.go):
//
//  1. image containing "udp-echo": UDP echo on every containerPort (default 9090);
//  2. command/args "sleep N" (also "sh -c 'sleep N'"): sleep N seconds;
//  3. image containing "echo", or any TCP containerPort: HTTP echo on the
//     TCP containerPorts (default 8080);
//  4. anything else (alpine, busybox, ...): sleep forever.
func planFor(c corev1.Container) workloadPlan {
	image := strings.ToLower(c.Image)
	if strings.Contains(image, "udp-echo") {
		var ports []int32
		for _, p := range c.Ports {
			ports = append(ports, p.ContainerPort)
		}
		if len(ports) == 0 {
			ports = []int32{defaultUDPPort}
		}
		return workloadPlan{Kind: kindUDP, Ports: ports}
	}
	if secs, ok := sleepSeconds(append(append([]string{}, c.Command...), c.Args...)); ok {
		return workloadPlan{Kind: kindSleep, Seconds: secs}
	}
	var tcp []int32
	for _, p := range c.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			tcp = append(tcp, p.ContainerPort)
		}
	}
	if len(tcp) > 0 || strings.Contains(image, "echo") {
		if len(tcp) == 0 {
			tcp = []int32{defaultHTTPPort}
		}
		return workloadPlan{Kind: kindHTTP, Ports: tcp}
	}
	return workloadPlan{Kind: kindSleep}
}

// sleepSeconds recognises "sleep N" and "sh -c 'sleep N'" and returns N
// (0 for "sleep infinity" or a duration it cannot read).
func sleepSeconds(argv []string) (int64, bool) {
	if len(argv) >= 3 && isShell(argv[0]) && argv[1] == "-c" {
		argv = strings.Fields(argv[2])
	}
	if len(argv) == 0 || path.Base(argv[0]) != "sleep" {
		return 0, false
	}
	if len(argv) < 2 {
		return 0, true
	}
	return parseSleep(argv[1]), true
}

// isShell reports whether cmd is a POSIX shell.
func isShell(cmd string) bool {
	switch path.Base(cmd) {
	case "sh", "bash", "ash", "dash":
		return true
	}
	return false
}

// parseSleep reads a sleep(1) duration: a number with an optional s, m, h or
// d suffix. It returns 0 (forever) for "infinity" or anything unreadable.
func parseSleep(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "s"):
		s = strings.TrimSuffix(s, "s")
	case strings.HasSuffix(s, "m"):
		s, mult = strings.TrimSuffix(s, "m"), 60
	case strings.HasSuffix(s, "h"):
		s, mult = strings.TrimSuffix(s, "h"), 3600
	case strings.HasSuffix(s, "d"):
		s, mult = strings.TrimSuffix(s, "d"), 86400
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1e12) { // also rejects NaN
		return 0
	}
	secs := int64(f * float64(mult))
	if secs == 0 {
		secs = 1 // sub-second sleeps round up: 0 would mean forever
	}
	return secs
}

// args returns the workload.Main arguments of the plan.
func (p workloadPlan) args(id podIdentity, readyFile string) []string {
	var a []string
	switch p.Kind {
	case kindHTTP:
		a = []string{"http", "--name", id.Pod, "--namespace", id.Namespace, "--cluster", id.Cluster, "--node", id.Node}
	case kindUDP:
		a = []string{"udp"}
	default:
		a = []string{"sleep", "--seconds", strconv.FormatInt(p.Seconds, 10)}
	}
	for _, port := range p.Ports {
		a = append(a, "--port", strconv.Itoa(int(port)))
	}
	if readyFile != "" {
		a = append(a, "--ready-file", readyFile)
	}
	return a
}

// env returns the environment variables that also tell a workload its pod.
func (id podIdentity) env() []string {
	return []string{
		"KFL_POD_NAME=" + id.Pod,
		"KFL_POD_NAMESPACE=" + id.Namespace,
		"KFL_CLUSTER=" + id.Cluster,
		"KFL_NODE_NAME=" + id.Node,
	}
}
