package kubelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// logPath is the log file of a container: every run of its workload
// appends its stdout and stderr there, after a run marker.
func (k *kubelet) logPath(namespace, pod, container string) string {
	return filepath.Join(k.logDir, fmt.Sprintf("%s_%s_%s.log", namespace, pod, container))
}

// handleLogs serves /containerLogs/{namespace}/{pod}/{container}: the
// output of the container's current run (or the one before, with
// previous=true), cut by tailLines and limitBytes, and with follow=true
// what the run writes next, until it ends or the client goes.
func (k *kubelet) handleLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := parseLogOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, _, err := k.podContainer(ns, name, container)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	path := k.logPath(ns, name, container)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", container, name), http.StatusBadRequest)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	runs := splitRuns(data)
	pick := len(runs) - 1
	if opts.Previous {
		pick--
	}
	if pick < 0 {
		what := "container"
		if opts.Previous {
			what = "previous terminated container"
		}
		http.Error(w, fmt.Sprintf("%s %q in pod %q not found", what, container, name), http.StatusBadRequest)
		return
	}
	run := runs[pick]
	w.Header().Set("Content-Type", "text/plain")
	out := &limitWriter{w: w, left: -1}
	if opts.LimitBytes > 0 {
		out.left = opts.LimitBytes
	}
	if _, err := out.Write(tailLines(data[run.Start:run.End], opts.TailLines)); err != nil {
		return
	}
	if !opts.Follow || opts.Previous {
		return
	}
	// Follow the run that is going on, if the container still runs it.
	var done <-chan struct{}
	if rt := k.runtime(ns + "/" + name); rt != nil && rt.uid == pod.UID {
		if c := rt.container(container); c != nil {
			if p := c.current.Load(); p != nil {
				done = p.done
			}
		}
	}
	if done == nil {
		return
	}
	flush := func() { _ = http.NewResponseController(w).Flush() }
	flush()
	if err := followLog(r.Context(), path, int64(run.End), out, flush, done); err != nil && !errors.Is(err, errLogLimit) {
		k.log.Debug("log follow ended", "pod", ns+"/"+name, "container", container, "err", err)
	}
}

// followLog copies what is appended to path after offset to out, whole
// lines at a time, until the run ends (done is closed and everything was
// read), a new run begins (a run marker), ctx ends or out fails.
func followLog(ctx context.Context, path string, offset int64, out io.Writer, flush func(), done <-chan struct{}) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("seek log: %w", err)
	}
	var pending []byte // a line not finished yet
	buf := make([]byte, 32<<10)
	finished := false
	for {
		n, rerr := f.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			for {
				nl := bytes.IndexByte(pending, '\n')
				if nl < 0 {
					break
				}
				if isRunMarker(pending[:nl]) {
					flush()
					return nil // the container restarted: this run is over
				}
				if _, err := out.Write(pending[:nl+1]); err != nil {
					flush()
					return err
				}
				pending = pending[nl+1:]
			}
			flush()
			continue
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("read log: %w", rerr)
		}
		if finished {
			_, err := out.Write(pending)
			flush()
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			finished = true // one more read for the last output
		case <-time.After(logFollowPollInterval):
		}
	}
}
