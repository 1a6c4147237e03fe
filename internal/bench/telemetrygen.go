package bench

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The OpenTelemetry Collector's load generator, pinned: the telemetrygen
// scenario's spans (names, attributes, sizes) are whatever this version
// generates.
const (
	TelemetrygenModule  = "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen"
	TelemetrygenVersion = "v0.161.0"
)

// TelemetrygenInstall is the command that installs the pinned telemetrygen.
const TelemetrygenInstall = "go install " + TelemetrygenModule + "@" + TelemetrygenVersion

// telemetrygenInstallTimeout bounds the first `go install` (it downloads and
// builds the collector's dependencies: minutes on a slow machine).
const telemetrygenInstallTimeout = 15 * time.Minute

// TelemetrygenLoad is one telemetrygen traces command: Workers goroutines
// each generate Traces traces of one root span and ChildSpans children,
// exported over OTLP/HTTP protobuf in batches of BatchSize, unthrottled.
type TelemetrygenLoad struct {
	Workers    int
	Traces     int // per worker
	ChildSpans int // per trace, at least 1 (telemetrygen raises 0 to 1)
	BatchSize  int
}

// Spans is how many spans the command generates.
func (l TelemetrygenLoad) Spans() int { return l.Workers * l.Traces * (1 + l.ChildSpans) }

// Args are the command's arguments for a server at endpoint (HOST:PORT).
func (l TelemetrygenLoad) Args(endpoint string) []string {
	return []string{"traces", "--otlp-http", "--otlp-insecure", "--otlp-endpoint", endpoint,
		"--workers", strconv.Itoa(l.Workers), "--traces", strconv.Itoa(l.Traces),
		"--child-spans", strconv.Itoa(l.ChildSpans), "--rate", "0", "--batch-size", strconv.Itoa(l.BatchSize)}
}

// Env is the command's environment, built from environ: every OTEL_
// variable is dropped (the SDK reads OTEL_EXPORTER_OTLP_* and OTEL_BSP_*,
// which would change what is sent), then OTEL_BSP_MAX_QUEUE_SIZE is set to
// the span count. telemetrygen's batch span processor has a queue of 2048
// spans by default and drops spans when it is full; unthrottled workers fill
// it in milliseconds, and a run of the command then delivers only
// about 30,000 of its 200,000 spans. With a queue that holds the whole run
// nothing is dropped: the workers fill the queue and one exporter drains it,
// one BatchSize request at a time.
func (l TelemetrygenLoad) Env(environ []string) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return append(out, "OTEL_BSP_MAX_QUEUE_SIZE="+strconv.Itoa(l.Spans()))
}

// Command is the command line as documented, for a server at endpoint.
func (l TelemetrygenLoad) Command(endpoint string) string {
	return "OTEL_BSP_MAX_QUEUE_SIZE=" + strconv.Itoa(l.Spans()) + " telemetrygen " + strings.Join(l.Args(endpoint), " ")
}

// checkTelemetrygenBuild reports whether bi is the build of the pinned
// telemetrygen.
func checkTelemetrygenBuild(bi *debug.BuildInfo) error {
	if bi.Main.Path != TelemetrygenModule {
		return fmt.Errorf("is a build of %q, not %s", bi.Main.Path, TelemetrygenModule)
	}
	if bi.Main.Version != TelemetrygenVersion {
		return fmt.Errorf("is telemetrygen %s, not %s", bi.Main.Version, TelemetrygenVersion)
	}
	return nil
}

// telemetrygenAt reports whether path is the pinned telemetrygen, from the
// build information Go writes into every binary.
func telemetrygenAt(path string) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read build information: %w", err)
	}
	return checkTelemetrygenBuild(bi)
}

var telemetrygenTool struct {
	once sync.Once
	path string
	err  error
}

// telemetrygenBinary returns the path of the pinned telemetrygen, installing
// it on first use; the answer, path or error, holds for the whole process.
func telemetrygenBinary(ctx context.Context, logf func(string, ...any)) (string, error) {
	t := &telemetrygenTool
	t.once.Do(func() { t.path, t.err = findOrInstallTelemetrygen(ctx, logf) })
	return t.path, t.err
}

// Telemetrygen returns the path of the pinned telemetrygen, as the harness
// finds or installs it (tests that drive it use this too).
func Telemetrygen(ctx context.Context, logf func(string, ...any)) (string, error) {
	return telemetrygenBinary(ctx, logf)
}

// findOrInstallTelemetrygen looks for the pinned telemetrygen on PATH, in the
// Go binary directory ($GOBIN, else $(go env GOPATH)/bin) and in the
// harness's cache; when none is the pinned version it runs
// TelemetrygenInstall: into the Go binary directory when that holds no
// telemetrygen yet, else into the cache (a telemetrygen of another version
// is left alone).
func findOrInstallTelemetrygen(ctx context.Context, logf func(string, ...any)) (string, error) {
	goTool, goErr := exec.LookPath("go")
	binDir := goBinDir(goTool)
	cacheDir := ""
	if c, err := os.UserCacheDir(); err == nil {
		cacheDir = filepath.Join(c, "rastro", "bench", "telemetrygen-"+TelemetrygenVersion)
	}
	var candidates []string
	if p, err := exec.LookPath("telemetrygen"); err == nil {
		candidates = append(candidates, p)
	}
	for _, d := range []string{binDir, cacheDir} {
		if d != "" {
			candidates = append(candidates, filepath.Join(d, "telemetrygen"))
		}
	}
	var mismatches []string
	seen := map[string]bool{}
	for _, p := range candidates {
		if _, err := os.Stat(p); err != nil || seen[filepath.Clean(p)] {
			continue
		}
		seen[filepath.Clean(p)] = true
		err := telemetrygenAt(p)
		if err == nil {
			return p, nil
		}
		mismatches = append(mismatches, p+" "+err.Error())
	}
	found := ""
	if len(mismatches) > 0 {
		found = " (found " + strings.Join(mismatches, "; ") + ")"
	}
	if goErr != nil {
		return "", fmt.Errorf("telemetrygen %s is not installed%s and there is no go command to install it (%v); install it with `%s`",
			TelemetrygenVersion, found, goErr, TelemetrygenInstall)
	}
	target := binDir
	if len(mismatches) > 0 || binDir == "" {
		target = cacheDir
	}
	if target == "" {
		return "", fmt.Errorf("telemetrygen %s is not installed%s and no directory to install it into was found; install it with `%s`", TelemetrygenVersion, found, TelemetrygenInstall)
	}
	if logf != nil {
		logf("installing telemetrygen: GOBIN=%s %s (the first build takes minutes)%s", target, TelemetrygenInstall, found)
	}
	ctx, cancel := context.WithTimeout(ctx, telemetrygenInstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "install", TelemetrygenModule+"@"+TelemetrygenVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+target)
	cmd.Dir = os.TempDir() // outside any module or workspace
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("telemetrygen %s is not installed%s and `%s` failed (%v): %s", TelemetrygenVersion, found, TelemetrygenInstall, err, lastLines(out.String(), 10))
	}
	p := filepath.Join(target, "telemetrygen")
	if err := telemetrygenAt(p); err != nil {
		return "", fmt.Errorf("`%s` into %s succeeded, but %s %v", TelemetrygenInstall, target, p, err)
	}
	return p, nil
}

// goBinDir is where `go install` puts binaries: $GOBIN, else the bin
// directory of the first $GOPATH entry, as `go env` reports them; "" when
// it cannot tell.
func goBinDir(goTool string) string {
	if goTool == "" {
		return ""
	}
	out, err := exec.Command(goTool, "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return ""
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 2 {
		return ""
	}
	if gobin := strings.TrimSpace(lines[0]); gobin != "" {
		return gobin
	}
	if paths := filepath.SplitList(strings.TrimSpace(lines[1])); len(paths) > 0 && paths[0] != "" {
		return filepath.Join(paths[0], "bin")
	}
	return ""
}

// lastLines returns the last n lines of s, trimmed, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
