package k8s

import "time"

// watchClock is the clock heartbeat Leases age by: this process's clock,
// standing still while the Lease watch delivers nothing.
//
// Every live agent renews its Lease every third of the lease duration, so
// the watch goes silent only when this process cannot see the API server
// (an outage, a broken watch) or every node is down. Judged by the wall
// clock, every Lease would then expire one after the other, in the order
// they were last renewed, and for up to a heartbeat period the node renewed
// last would be the only ready one of its location: a leader change for
// nothing when the outage starts, and again when the watch comes back with
// the renewals one at a time. By this clock, Leases keep the age they had
// when the API server was last seen, and age again once events resume: a
// node that died during an outage expires one lease duration (less the age
// it had) after the watch is back.
type watchClock struct {
	// last is when the last event came, on this process's clock; zero
	// before the first.
	last time.Time
	// paused is how long the clock has stood still in all.
	paused time.Duration
}

// watchGrace is how long the clock runs on after an event: half the lease
// duration, longer than the heartbeat period (a third) that keeps events
// coming while any agent is alive.
func watchGrace(d time.Duration) time.Duration { return d / 2 }

// event records a watch event at now and returns the watch time of now.
func (w *watchClock) event(now time.Time, d time.Duration) time.Time {
	if !w.last.IsZero() {
		if now.Before(w.last) {
			now = w.last
		}
		if gap := now.Sub(w.last) - watchGrace(d); gap > 0 {
			w.paused += gap
		}
	}
	w.last = now
	return now.Add(-w.paused)
}

// at returns the watch time of now: it stands still from watchGrace after
// the last event.
func (w *watchClock) at(now time.Time, d time.Duration) time.Time {
	if !w.last.IsZero() && now.Sub(w.last) > watchGrace(d) {
		now = w.last.Add(watchGrace(d))
	}
	return now.Add(-w.paused)
}
