// Package cli implements the rastro command line: one file per subcommand.
// Every command returns an error instead of exiting, and writes to the
// writers in Env so tests can capture its output.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Env is what a command may touch: its output writers and environment lookup.
type Env struct {
	Stdout    io.Writer
	Stderr    io.Writer
	LookupEnv func(string) (string, bool)
	// Zone is the time zone of the times in tables (nil: the local zone;
	// --utc: UTC). Tests fix it.
	Zone *time.Location
}

// Command is one subcommand.
type Command struct {
	Name  string
	Short string // one line for the command list
	// Run executes the command with the arguments after its name.
	Run func(ctx context.Context, env *Env, args []string) error
}

var commands = map[string]*Command{}

// register adds a command; each command file calls it from init.
func register(c *Command) {
	if _, dup := commands[c.Name]; dup {
		panic("cli: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// errUsage marks an error caused by the command line itself (exit code 2).
var errUsage = errors.New("usage error")

// Main runs the command named by args[0] and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, &Env{Stdout: stdout, Stderr: stderr, LookupEnv: os.LookupEnv}, args)
}

// run is Main with a given environment.
func run(ctx context.Context, env *Env, args []string) int {
	stderr := env.Stderr
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "rastro: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := c.Run(ctx, env, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "rastro %s: %s\n", c.Name, errorMessage(c.Name, err))
		return 2
	default:
		fmt.Fprintf(stderr, "rastro %s: %s\n", c.Name, errorMessage(c.Name, err))
		return 1
	}
}

// errorMessage is err's text without a leading "NAME: " (or "NAME ...: "
// from a library wrapping its own errors, e.g. "fsck: "), which the
// "rastro NAME: " prefix already says.
func errorMessage(name string, err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, name+": "); ok {
		return rest
	}
	return msg
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "rastro: an OpenTelemetry trace store for LLM and agent applications")
	fmt.Fprintln(w, "\nUsage: rastro COMMAND [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Short)
	}
	fmt.Fprintln(w, "\nRun 'rastro COMMAND --help' for a command's flags. Every command but serve and completion takes --json;")
	fmt.Fprintln(w, "the client commands print times in the local zone (--utc: UTC).")
	fmt.Fprintln(w, "Exit codes: 0 success, 1 failure (the server refused, a check found problems), 2 usage error (a bad flag or argument).")
}

// newFlagSet returns a flag set whose errors go to env.Stderr and whose
// parse errors come back as usage errors.
func newFlagSet(env *Env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("rastro "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "Usage: rastro %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, mapping flag errors (other than -h) to errUsage.
// Flags may come before or after positional arguments ("rastro trace ID
// --server URL"); everything after a "--" is positional.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var pos, tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	// Leave the positional arguments in fs.Args().
	return fs.Parse(append([]string{"--"}, append(pos, tail...)...))
}

// envDefaults sets each flag that was not given on the command line from its
// environment twin: flag "data-dir" reads RASTRO_DATA_DIR. Call after Parse.
// A twin set to the empty string is ignored (as if unset), except for the
// flags whose empty value means something (emptyMeaningful):
// RASTRO_GRPC_ADDR= turns gRPC off, as --grpc-addr "" does.
func envDefaults(fs *flag.FlagSet, env *Env) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		name := EnvName(f.Name)
		v, set := env.LookupEnv(name)
		if !set || v == "" && !emptyMeaningful[f.Name] {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v", name, v, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("%w: %v", errUsage, errors.Join(errs...))
	}
	return nil
}

// emptyMeaningful are the flags whose empty value is not their default's
// absence but a setting of its own.
var emptyMeaningful = map[string]bool{"grpc-addr": true}

// EnvName returns the environment variable twin of a flag name.
func EnvName(flagName string) string {
	return "RASTRO_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
