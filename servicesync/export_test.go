package servicesync

import "time"

// SetSyncTimeout sets NewLocalClient's bound on its informers' first list
// and returns the function that restores it.
func SetSyncTimeout(d time.Duration) func() {
	old := syncTimeout
	syncTimeout = d
	return func() { syncTimeout = old }
}
