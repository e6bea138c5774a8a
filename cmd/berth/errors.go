package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit status.
type exitError struct {
	code   int
	err    error
	silent bool // already reported; print nothing more
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks a usage error (exit 2): a bad flag, argument or value.
func usageErr(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

func exitCode(err error) int {
	var ex *exitError
	if errors.As(err, &ex) {
		return ex.code
	}
	return 1
}

// oneLine keeps an error to one line: the console's errors are read in
// terminals and log lines.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// exactArgs is cobra.ExactArgs with a usage exit status and named arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageErr("%s: expected %s, got %d argument(s)", cmd.CommandPath(), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// noArgs refuses positional arguments with a usage exit status.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr("%s: unexpected argument %q", cmd.CommandPath(), args[0])
	}
	return nil
}
