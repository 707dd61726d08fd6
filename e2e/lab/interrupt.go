package lab

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// A test binary dies on SIGINT (Ctrl-C) or SIGTERM without running
// t.Cleanup, and the lab's processes live in process groups of their own, so
// they would outlive it. StartT therefore tracks its labs and, on either
// signal, closes them all before the binary exits. (SIGKILL and go test's
// timeout cannot be caught: the next lab's Sweep removes what they leave.)
var interrupts struct {
	sync.Mutex
	once sync.Once
	labs map[*Lab]bool
}

// closeOnInterrupt makes l close when the process is interrupted.
func closeOnInterrupt(l *Lab) {
	interrupts.once.Do(func() {
		interrupts.labs = map[*Lab]bool{}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-ch
			interrupts.Lock()
			for l := range interrupts.labs {
				fmt.Fprintf(os.Stderr, "lab %s: %v: tearing down\n", l.Spec.Name, sig)
				_ = l.Close()
			}
			os.Exit(130)
		}()
	})
	interrupts.Lock()
	defer interrupts.Unlock()
	interrupts.labs[l] = true
}

// forgetOnInterrupt stops tracking l once it is closed.
func forgetOnInterrupt(l *Lab) {
	interrupts.Lock()
	defer interrupts.Unlock()
	delete(interrupts.labs, l)
}
