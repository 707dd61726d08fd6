package agentsim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Counters are the API server's request and watch-event counters at one
// moment, summed over the labels that do not matter here.
type Counters struct {
	// Requests counts requests by "VERB RESOURCE" (apiserver_request_total,
	// summed over codes, scopes, groups and versions). Long-running WATCH
	// requests are counted when they end, so a watch open for the whole
	// window is not in the delta.
	Requests map[string]float64
	// WatchEvents counts the events sent to watchers by resource or kind
	// (apiserver_watch_events_total).
	WatchEvents map[string]float64
}

// Sub returns c - prev, key by key.
func (c Counters) Sub(prev Counters) Counters {
	sub := func(a, b map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range a {
			if d := v - b[k]; d != 0 {
				out[k] = d
			}
		}
		return out
	}
	return Counters{Requests: sub(c.Requests, prev.Requests), WatchEvents: sub(c.WatchEvents, prev.WatchEvents)}
}

// TotalRequests sums Requests, WATCH excluded when !watches.
func (c Counters) TotalRequests(watches bool) float64 {
	var n float64
	for k, v := range c.Requests {
		if !watches && strings.HasPrefix(k, "WATCH ") {
			continue
		}
		n += v
	}
	return n
}

// TotalWatchEvents sums WatchEvents.
func (c Counters) TotalWatchEvents() float64 {
	var n float64
	for _, v := range c.WatchEvents {
		n += v
	}
	return n
}

// Scrape reads the API server's /metrics through cfg.
func Scrape(ctx context.Context, cfg *rest.Config) (Counters, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Counters{}, err
	}
	body, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return Counters{}, fmt.Errorf("GET /metrics: %w", err)
	}
	defer body.Close()
	return ParseMetrics(body)
}

// ParseMetrics reads apiserver_request_total and
// apiserver_watch_events_total from Prometheus' text format.
func ParseMetrics(r io.Reader) (Counters, error) {
	c := Counters{Requests: map[string]float64{}, WatchEvents: map[string]float64{}}
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		var into map[string]float64
		var key func(map[string]string) string
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			into = c.Requests
			key = func(l map[string]string) string { return l["verb"] + " " + resourceOf(l) }
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			into = c.WatchEvents
			key = resourceOf
		default:
			continue
		}
		labels, value, err := parseSample(line)
		if err != nil {
			return c, fmt.Errorf("metrics line %q: %w", line, err)
		}
		into[key(labels)] += value
	}
	return c, s.Err()
}

// resourceOf names what a sample counts: its resource (and subresource),
// else its kind, else its path ("/metrics").
func resourceOf(l map[string]string) string {
	r := l["resource"]
	if r == "" {
		r = strings.ToLower(l["kind"])
	}
	if r == "" {
		r = "-"
	}
	if sub := l["subresource"]; sub != "" {
		r += "/" + sub
	}
	return r
}

// parseSample splits `name{a="x",b="y"} 12.5` into its labels and value.
func parseSample(line string) (map[string]string, float64, error) {
	open := strings.IndexByte(line, '{')
	end := strings.LastIndexByte(line, '}')
	if open < 0 || end < open {
		return nil, 0, fmt.Errorf("no labels")
	}
	labels := map[string]string{}
	rest := line[open+1 : end]
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 || eq+1 >= len(rest) || rest[eq+1] != '"' {
			return nil, 0, fmt.Errorf("bad label at %q", rest)
		}
		name := strings.TrimSpace(rest[:eq])
		v, tail, err := quoted(rest[eq+1:])
		if err != nil {
			return nil, 0, err
		}
		labels[name] = v
		rest = strings.TrimPrefix(strings.TrimSpace(tail), ",")
	}
	fields := strings.Fields(line[end+1:])
	if len(fields) == 0 {
		return nil, 0, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return labels, v, err
}

// quoted reads a double-quoted label value at the start of s.
func quoted(s string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
			}
		case '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", fmt.Errorf("unterminated label value")
}

// clockTicks is the unit of /proc/PID/stat's times (USER_HZ; 100 on every
// Linux architecture Go supports).
const clockTicks = 100

// ProcCPUSeconds returns the user and system CPU time process pid used so
// far, from /proc/PID/stat.
func ProcCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command may hold spaces and parentheses: fields start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return (utime + stime) / clockTicks, nil
}

// SelfCPUSeconds returns this process's user and system CPU time so far.
func SelfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// RSSBytes returns process pid's resident memory (VmRSS).
func RSSBytes(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

// RSSAnonBytes returns process pid's anonymous resident memory (RssAnon):
// its heap and stacks, without the pages of its executable and libraries
// that VmRSS also counts.
func RSSAnonBytes(pid int) (int64, error) { return statusBytes(pid, "RssAnon") }

// statusBytes returns the field of /proc/PID/status given in kB, in bytes.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

// ChildPID returns the PID of the child of parent whose executable is
// named name (such as the kube-apiserver and etcd that envtest started).
// When several match (a previous round's, or a failed start's, still
// exiting), it returns the one started last; zombies do not count.
func ChildPID(parent int, name string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var stats []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			stats = append(stats, string(b))
		}
	}
	if pid, ok := newestChild(stats, parent, name); ok {
		return pid, nil
	}
	return 0, fmt.Errorf("no child %q of process %d", name, parent)
}

// newestChild picks, among /proc/PID/stat lines, the live child of parent
// named name (the kernel cuts comm to 15 bytes) started last.
func newestChild(stats []string, parent int, name string) (pid int, ok bool) {
	var newest uint64
	for _, s := range stats {
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 1 || end < open {
			continue
		}
		// After the comm: state (1), ppid (2), ..., starttime (20).
		f := strings.Fields(s[end+1:])
		if len(f) < 20 || f[0] == "Z" || f[1] != strconv.Itoa(parent) {
			continue
		}
		if comm := s[open+1 : end]; comm != name && !(strings.HasPrefix(name, comm) && len(comm) == 15) {
			continue
		}
		p, err1 := strconv.Atoi(strings.TrimSpace(s[:open]))
		start, err2 := strconv.ParseUint(f[19], 10, 64)
		if err1 != nil || err2 != nil || ok && start < newest {
			continue
		}
		pid, newest, ok = p, start, true
	}
	return pid, ok
}
