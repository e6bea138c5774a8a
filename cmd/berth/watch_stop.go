package main

import "os"

// stopOnEnter is how a re-failure watch is left early from the command
// line, the same on Kafka and RabbitMQ: on a terminal a line typed on stdin
// (enter) closes the returned channel; ctrl+c always works. how is what the
// watch line says about it. Without a terminal the channel is nil (never
// closed). The reading goroutine may outlive the watch; the process ends
// soon after.
func (a *app) stopOnEnter() (stop <-chan struct{}, how string) {
	if !isTerminal(os.Stdin) || !isTerminal(a.stderr) {
		return nil, "ctrl+c stops watching"
	}
	c := make(chan struct{})
	go func() {
		var b [1]byte
		if n, _ := os.Stdin.Read(b[:]); n > 0 {
			close(c)
		}
	}()
	return c, "enter or ctrl+c stops watching"
}
