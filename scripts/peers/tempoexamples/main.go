// Command tempoexamples runs Rastro's TraceQL parser over Grafana Tempo's
// own parser examples (pkg/traceql/test_examples.yaml in a Tempo checkout;
// the file is under the AGPL, so it is read from the checkout, not copied
// here) and reports which valid queries Rastro refuses and which invalid
// ones it accepts. It exits 1 when a valid query other than the known
// exceptions is refused or a parse failure is accepted.
//
//	go run ./scripts/peers/tempoexamples /path/to/tempo/pkg/traceql/test_examples.yaml
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/rastro-dev/rastro/internal/query"
)

// known are valid Tempo queries Rastro refuses on purpose: nested-set
// intrinsics are Tempo's storage numbering, not a span property.
var known = []string{"nestedSetLeft", "nestedSetRight", "nestedSetParent"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tempoexamples TEMPO/pkg/traceql/test_examples.yaml")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	section := ""
	accepted, refused := map[string]int{}, map[string]int{}
	failed := false
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(line, " ") && strings.HasSuffix(trimmed, ":") {
			section = strings.TrimSuffix(trimmed, ":")
			continue
		}
		if !strings.HasPrefix(trimmed, "- ") {
			continue
		}
		q := strings.TrimPrefix(trimmed, "- ")
		// Entries are single-quoted YAML scalars, sometimes followed by a
		// comment; '' is a quote.
		if !strings.HasPrefix(q, "'") {
			continue
		}
		end := strings.LastIndex(q, "'")
		if end == 0 {
			continue
		}
		q = strings.ReplaceAll(q[1:end], "''", "'")
		_, err := query.ParseQuery(q)
		if err == nil {
			accepted[section]++
		} else {
			refused[section]++
		}
		switch {
		case section == "valid" && err != nil:
			exempt := false
			for _, k := range known {
				exempt = exempt || strings.Contains(q, k)
			}
			fmt.Printf("valid, refused%s: %s\n    %v\n", map[bool]string{true: " (known)"}[exempt], q, err)
			failed = failed || !exempt
		case section == "parse_fails" && err == nil:
			fmt.Printf("parse failure, accepted: %s\n", q)
			failed = true
		}
	}
	for _, s := range []string{"valid", "parse_fails", "validate_fails", "unsupported"} {
		fmt.Printf("%-15s accepted %3d  refused %3d\n", s, accepted[s], refused[s])
	}
	if failed {
		os.Exit(1)
	}
}
