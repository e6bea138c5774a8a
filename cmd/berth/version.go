package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

func init() {
	register(func(a *app) *cobra.Command {
		return &cobra.Command{
			Use:         "version",
			Short:       "Print the version, commit and Go version",
			Args:        noArgs,
			Annotations: map[string]string{"config": "none"},
			RunE: func(cmd *cobra.Command, _ []string) error {
				fmt.Fprintf(a.stdout, "berth %s (commit %s, %s)\n", version, buildCommit(), runtime.Version())
				return nil
			},
		}
	})
}

func buildCommit() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			if dirty {
				rev += "-dirty"
			}
			return rev
		}
	}
	return "unknown"
}
