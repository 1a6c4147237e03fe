package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// LoadStartLine begins the line `rastro load` writes to stderr when its
// corpus is generated and encoded and its clock starts.
const LoadStartLine = "rastro load: sending"

// LoadProcess describes a load run in a process of its own: `rastro load`
// of Binary, generating the corpus itself. A generator in the harness's own
// process shares that process's scheduler with the client being timed; in
// its own process, at a lower priority (Nice), it stands for senders on
// other machines: the host's CPUs go first to the server and to the client
// whose latency is measured.
type LoadProcess struct {
	Binary  string
	Corpus  string
	Options CorpusOptions // Seed, Spans, Start, Window
	Batch   int
	Nice    int
	// Load: Endpoint, Protocol (otlp-proto), Concurrency, Rate, Duration,
	// Loop, FreshIDs (PassShift is the corpus window), KeepAlive, Retry429.
	Load LoadOptions
}

// args is the `rastro load` command line of p.
func (p LoadProcess) args() ([]string, error) {
	o := p.Load
	if o.Gzip || o.Project != "" || o.Token != "" || o.OnAck != nil {
		return nil, errors.New("load process: gzip, projects, tokens and acknowledgement callbacks are not passed to rastro load")
	}
	if o.FreshIDs && o.PassShift != p.Options.Window {
		return nil, fmt.Errorf("load process: rastro load moves each fresh pass by its window (%s), not %s", p.Options.Window, o.PassShift)
	}
	if o.Loop != (o.Duration > 0) {
		return nil, errors.New("load process: rastro load loops exactly when it has a duration")
	}
	a := []string{"load", "--json", "--progress", "0",
		"--endpoint", o.Endpoint, "--protocol", string(o.Protocol), "--corpus", p.Corpus,
		"--concurrency", strconv.Itoa(max(o.Concurrency, 1)), "--batch", strconv.Itoa(p.Batch),
		"--spans", strconv.Itoa(p.Options.Spans), "--seed", strconv.FormatUint(p.Options.Seed, 10),
		"--start", p.Options.Start.UTC().Format(time.RFC3339Nano), "--window", p.Options.Window.String(),
		"--rate", strconv.FormatFloat(o.Rate, 'f', -1, 64), "--duration", o.Duration.String(),
		"--keepalive=" + strconv.FormatBool(o.KeepAlive), "--fresh-ids=" + strconv.FormatBool(o.FreshIDs),
		"--retry-429=" + strconv.FormatBool(o.Retry429), "--nice", strconv.Itoa(p.Nice)}
	return a, nil
}

// RunningLoad is a started LoadProcess whose clock has started.
type RunningLoad struct {
	// Nice is the lowest nice value of the process's threads when it began
	// to send (-1 where it cannot be read): what the priority really is.
	Nice   int
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr strings.Builder // written by the reader goroutine until done
	done   chan error
}

// StartLoadProcess starts p and returns once the process has generated its
// corpus and begun to send (its start line), so that what the caller times
// next runs against the load. The process ends with ctx, or at the end of
// its duration.
func StartLoadProcess(ctx context.Context, p LoadProcess) (*RunningLoad, error) {
	args, err := p.args()
	if err != nil {
		return nil, err
	}
	r := &RunningLoad{done: make(chan error, 1)}
	r.cmd = exec.CommandContext(ctx, p.Binary, args...)
	bindToParent(r.cmd)
	r.cmd.Stdout = &r.stdout
	pipe, err := r.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s load: %w", p.Binary, err)
	}
	// sending is closed at the start line; ended, if the process ends
	// without one, once done holds its outcome.
	sending, ended := make(chan struct{}), make(chan struct{})
	go func() { // reads stderr to its end, then reaps the process
		sc := bufio.NewScanner(pipe)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			r.stderr.WriteString(line + "\n")
			if !signalled && strings.HasPrefix(line, LoadStartLine) {
				signalled = true
				close(sending)
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		r.done <- r.cmd.Wait()
		if !signalled {
			close(ended)
		}
	}()
	select {
	case <-sending:
	case <-ended:
		err := <-r.done
		r.done <- err
		return nil, fmt.Errorf("load process ended before sending: %v: %s", err, lastLines(r.stderr.String(), 10))
	case <-ctx.Done():
		return nil, ctx.Err() // the process is killed with ctx
	}
	if r.Nice, err = readThreadsNice(r.cmd.Process.Pid); err != nil {
		r.Nice = -1
	}
	return r, nil
}

// Wait waits for the load to end and returns what it measured.
func (r *RunningLoad) Wait() (LoadResult, error) {
	err := <-r.done
	var res LoadResult
	if jerr := json.Unmarshal(r.stdout.Bytes(), &res); jerr != nil {
		if err == nil {
			err = fmt.Errorf("load process answered no result: %w", jerr)
		}
		return res, fmt.Errorf("load process: %w: %s", err, lastLines(r.stderr.String(), 10))
	}
	if err != nil {
		return res, fmt.Errorf("load process: %w: %s", err, lastLines(r.stderr.String(), 10))
	}
	return res, nil
}
