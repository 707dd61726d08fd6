package workload

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// runSleep holds the container open for --seconds (forever when 0) or until
// ctx ends.
func runSleep(ctx context.Context, args []string, logger *slog.Logger) error {
	fs := newFlagSet("sleep")
	seconds := fs.Int64("seconds", 0, "seconds to sleep; 0 sleeps until stopped")
	ready := fs.String("ready-file", "", "file to create once started")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *seconds < 0 {
		return fmt.Errorf("%w: sleep: --seconds %d is negative; give 0 to sleep forever", ErrUsage, *seconds)
	}
	if err := markReady(*ready); err != nil {
		return err
	}
	logger.Info("sleeping", "seconds", *seconds)
	if *seconds == 0 {
		<-ctx.Done()
		logger.Info("sleep stopped")
		return nil
	}
	t := time.NewTimer(time.Duration(*seconds) * time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		logger.Info("sleep stopped")
	case <-t.C:
		logger.Info("sleep done")
	}
	return nil
}
