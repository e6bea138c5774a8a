// Command berth is a terminal operations console for Kafka and RabbitMQ.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/berth-dev/berth/internal/config"
	"github.com/berth-dev/berth/internal/sanitize"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the process exit status:
// 0 success, 1 failure, 2 usage error, 3 SLO breach (lag --fail-on-breach).
// Output goes to stdout and stderr so tests can run commands in-process.
func run(args []string, stdout, stderr io.Writer) int {
	a := newApp(stdout, stderr)
	defer a.close()
	root := newRoot(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ex *exitError
	if errors.As(err, &ex) && ex.silent {
		return ex.code
	}
	// Errors quote names typed by the user or read from the cluster: escape
	// any control sequence so the line cannot drive the terminal.
	fmt.Fprintln(stderr, "berth: "+sanitize.Text(config.RedactError(oneLine(err.Error()))))
	return exitCode(err)
}
