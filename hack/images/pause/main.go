// Command pause is the first process of every pod sandbox on plumb's local node.
//
// It holds the pod's namespaces open by staying alive, exits 0 on SIGTERM or SIGINT (the
// runtime's way to stop a sandbox), and reaps zombies: when the pod shares its process
// namespace, pause is PID 1 there and inherits every orphaned process, whose exit status nobody
// else will collect.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "pause takes no arguments, got %q\n", os.Args[1:])
		os.Exit(2)
	}
	// Buffered so that signals arriving together are not dropped while one is handled; several
	// SIGCHLDs may still merge into one, which is why reap collects every exited child per call.
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	// Children that exited before Notify took effect raised a SIGCHLD nobody saw.
	reap()
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects the exit status of every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		// pid 0: children remain but none has exited; ECHILD: no children at all.
		if err != nil || pid <= 0 {
			return
		}
	}
}
