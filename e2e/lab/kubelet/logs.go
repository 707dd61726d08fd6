package kubelet

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// ErrLogOption means a containerLogs query asks for something the stand-in
// cannot give or is malformed.
var ErrLogOption = errors.New("unsupported or invalid log option")

// logOptions are the containerLogs query parameters the stand-in honours.
type logOptions struct {
	Follow   bool
	Previous bool
	// TailLines, when >= 0, keeps the last TailLines lines; -1 keeps all.
	TailLines int64
	// LimitBytes, when > 0, stops the output after that many bytes.
	LimitBytes int64
}

// parseLogOptions reads the query the API server sends to
// /containerLogs (follow, previous, tailLines or the older tail, limitBytes,
// stream). Options that need per-line times or separate streams
// (timestamps, sinceSeconds, sinceTime, stream other than All) are
// refused with ErrLogOption: workloads' stdout and stderr go to one file
// without times.
func parseLogOptions(q url.Values) (logOptions, error) {
	o := logOptions{TailLines: -1}
	var errs []error
	boolean := func(name string) bool {
		s := q.Get(name)
		if s == "" {
			return false
		}
		v, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a boolean", name, s))
		}
		return v
	}
	integer := func(name string, lowest int64) (int64, bool) {
		s := q.Get(name)
		if s == "" {
			return 0, false
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < lowest {
			errs = append(errs, fmt.Errorf("%s=%q is not an integer >= %d", name, s, lowest))
			return 0, false
		}
		return v, true
	}
	o.Follow = boolean("follow")
	o.Previous = boolean("previous")
	if boolean("timestamps") {
		errs = append(errs, errors.New("timestamps: the lab kubelet records no per-line times; drop --timestamps"))
	}
	if tail := q.Get("tail"); tail != "" && tail != "all" && q.Get("tailLines") == "" {
		q = cloneWith(q, "tailLines", tail)
	}
	if n, ok := integer("tailLines", 0); ok {
		o.TailLines = n
	}
	if n, ok := integer("limitBytes", 1); ok {
		o.LimitBytes = n
	}
	if q.Get("sinceSeconds") != "" || q.Get("sinceTime") != "" {
		errs = append(errs, errors.New("sinceSeconds/sinceTime: the lab kubelet records no per-line times; use --tail instead of --since"))
	}
	if s := q.Get("stream"); s != "" && s != "All" {
		errs = append(errs, fmt.Errorf("stream=%s: the lab kubelet keeps stdout and stderr in one log; drop --stream", s))
	}
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("%w: %w", ErrLogOption, err)
	}
	return o, nil
}

// cloneWith returns a copy of q with key set to value.
func cloneWith(q url.Values, key, value string) url.Values {
	c := url.Values{}
	for k, v := range q {
		c[k] = v
	}
	c.Set(key, value)
	return c
}

// runMarkerPrefix starts the line that the kubelet writes into a
// container's log file before each run of its workload.
const runMarkerPrefix = "--- "

// runMarker returns the line written before a run started at t with argv.
func runMarker(t time.Time, argv []string) string {
	return fmt.Sprintf("%s%s start: %q\n", runMarkerPrefix, t.Format(time.RFC3339Nano), argv)
}

// isRunMarker reports whether line (without its newline) is a run marker.
func isRunMarker(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte(runMarkerPrefix))
	if !ok {
		return false
	}
	ts, tail, ok := bytes.Cut(rest, []byte(" start: "))
	if !ok || !bytes.HasPrefix(tail, []byte("[")) {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, string(ts))
	return err == nil
}

// logRun is the output of one run: data[Start:End] of the log file.
type logRun struct{ Start, End int }

// splitRuns cuts a container log file into the output of each run, in
// order, without the markers. Output before the first marker (none in
// files the kubelet writes) counts as a run of its own.
func splitRuns(data []byte) []logRun {
	var runs []logRun
	start, open := 0, false // open: a marker began the run at start
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			break // a last line still being written is output
		}
		end := off + nl
		if isRunMarker(data[off:end]) {
			if open || off > start {
				runs = append(runs, logRun{Start: start, End: off})
			}
			start, open = end+1, true
		}
		off = end + 1
	}
	if open || len(data) > start {
		runs = append(runs, logRun{Start: start, End: len(data)})
	}
	return runs
}

// tailLines returns the last n lines of b (a last line without newline
// counts); n < 0 returns b.
func tailLines(b []byte, n int64) []byte {
	if n < 0 {
		return b
	}
	if n == 0 {
		return nil
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end-- // the final newline ends the last line, it does not start one
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}

// limitWriter stops writing after its budget; errLogLimit ends a stream.
type limitWriter struct {
	w    interface{ Write([]byte) (int, error) }
	left int64 // < 0: no limit
}

// errLogLimit means limitBytes was reached.
var errLogLimit = errors.New("log byte limit reached")

// Write writes p, cut to the budget.
func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left < 0 {
		return l.w.Write(p)
	}
	if l.left == 0 {
		return 0, errLogLimit
	}
	cut := p
	if int64(len(cut)) > l.left {
		cut = cut[:l.left]
	}
	n, err := l.w.Write(cut)
	l.left -= int64(n)
	if err == nil && len(cut) < len(p) {
		err = errLogLimit
	}
	return n, err
}
