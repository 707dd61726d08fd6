package lab

import (
	"log/slog"
)

// Option changes how Start runs a lab.
type Option func(*options)

type options struct {
	logger   *slog.Logger
	tempBase string
	labBin   string
	bins     string
}

// WithLogger sends the lab's own log (and the kubelet stand-ins') to logger.
// By default it is discarded; component logs always go to Lab.Dir/logs.
func WithLogger(logger *slog.Logger) Option { return func(o *options) { o.logger = logger } }

// WithTempDir creates the lab's temp dir under base instead of os.TempDir().
// Sweep only cleans kfl-* dirs of os.TempDir().
func WithTempDir(base string) Option { return func(o *options) { o.tempBase = base } }

// WithLabBinary uses path as the kilofed-lab binary that runs pod
// workloads (its "workload" subcommand) instead of $KILOFED_BIN or a go
// build; the kilofed-lab command passes its own executable.
func WithLabBinary(path string) Option { return func(o *options) { o.labBin = path } }

// WithBins takes the control-plane binaries from dir instead of BinsDir().
func WithBins(dir string) Option { return func(o *options) { o.bins = dir } }
