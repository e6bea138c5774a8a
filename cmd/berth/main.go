// Command berth is a terminal operations console for Kafka and RabbitMQ.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/berth-dev/berth/internal/config"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line and returns the process exit status:
// 0 success, 1 failure, 2 usage error, 3 SLO breach (lag --fail-on-breach).
func run(args []string) int {
	root := newRoot(newApp(os.Stdout, os.Stderr))
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ex *exitError
	if errors.As(err, &ex) && ex.silent {
		return ex.code
	}
	fmt.Fprintln(os.Stderr, "berth: "+config.RedactError(oneLine(err.Error())))
	return exitCode(err)
}
