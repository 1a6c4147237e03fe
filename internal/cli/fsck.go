package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rastro-dev/rastro/internal/engine"
)

func init() {
	register(&Command{Name: "fsck", Short: "check (and with --repair, repair) a stopped server's data directory", Run: runFsck})
}

// errProblemsRemain makes fsck exit with status 1 after its report.
var errProblemsRemain = errors.New("problems remain")

func runFsck(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "fsck", "[flags] DATA_DIR")
	repair := fs.Bool("repair", false, "quarantine damaged segments, rebuild derivable ones and the manifest, replay a damaged WAL")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	blockSpans := fs.Int("block-spans", 0, "spans per block of segments a repair writes (0: the server's default)")
	noContent := fs.Bool("no-content-index", false, "repair writes segments without full-text token filters (match the server's flag)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: give exactly one DATA_DIR", errUsage)
	}
	what := "checking " + fs.Arg(0)
	if *repair {
		what = "checking and repairing " + fs.Arg(0)
	}
	stop := newProgress(env).while(what)
	rep, err := engine.Fsck(fs.Arg(0), engine.FsckOptions{Repair: *repair,
		Engine: engine.Options{BlockSpans: *blockSpans, NoContentIndex: *noContent}})
	stop()
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(env.Stdout)
			enc.SetIndent("", "  ")
			if jerr := enc.Encode(rep); jerr != nil {
				return jerr
			}
		} else {
			printFsck(env, rep)
		}
	}
	if err != nil {
		return err
	}
	if !rep.Clean() {
		n := len(rep.Problems)
		if rep.Repaired {
			n = len(rep.Remaining)
		}
		return fmt.Errorf("%w: %d", errProblemsRemain, n)
	}
	return nil
}

func printFsck(env *Env, rep *engine.FsckReport) {
	w := env.Stdout
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "PROBLEM %s\n", p)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note    %s\n", n)
	}
	for _, u := range rep.Unchecked {
		fmt.Fprintf(w, "skip    %s: not a file this version checks\n", u)
	}
	for _, a := range rep.Actions {
		fmt.Fprintf(w, "repair  %s\n", a)
	}
	if rep.Repaired {
		for _, p := range rep.Remaining {
			fmt.Fprintf(w, "REMAINS %s\n", p)
		}
	}
	fmt.Fprintf(w, "checked %s (%s, %s, %s), %s in %s, %s in %s: %s",
		plural(rep.Segments, "segment"), plural(rep.Blocks, "block"), plural(rep.Spans, "span"), plural(rep.SegmentBytes, "byte"),
		plural(rep.Values, "stored value"), plural(rep.ValuePacks, "pack"), plural(rep.WALRecords, "WAL record"), plural(rep.WALFiles, "file"),
		plural(len(rep.Problems), "problem"))
	if rep.Repaired {
		fmt.Fprintf(w, ", %d remain after repair", len(rep.Remaining))
	}
	fmt.Fprintln(w)
}
