package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// LoadStartLine begins the line `rastro load` writes to stderr when its
// corpus is generated and encoded and its clock starts.
const LoadStartLine = "rastro load: sending"

// LoadReadyLine begins the line `rastro load --hold` writes to stderr when
// its corpus is generated and encoded; it starts its clock once its
// standard input closes.
const LoadReadyLine = "rastro load: ready"

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
	// Load: Endpoint, Protocol, Concurrency, Rate, Duration, Loop, FreshIDs
	// (PassShift is the corpus window), KeepAlive, Retry429, Project,
	// Timeout. OnAck cannot cross the process boundary: AckedFile does its
	// work.
	Load LoadOptions
	// Hold makes StartLoadProcess return once the corpus is generated; the
	// process starts sending at RunningLoad.Release, so that several
	// processes start together.
	Hold bool
	// AckedFile, when set, is where the process writes the send number of
	// every acknowledged request (LoadOptions.OnAck's number), read back
	// with ReadAckedFile.
	AckedFile string
}

// args is the `rastro load` command line of p.
func (p LoadProcess) args() ([]string, error) {
	o := p.Load
	if o.Gzip || o.Token != "" || o.OnAck != nil {
		return nil, errors.New("load process: gzip, tokens and acknowledgement callbacks are not passed to rastro load (AckedFile lists the acknowledged requests)")
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
	if o.Project != "" {
		a = append(a, "--project", o.Project)
	}
	if o.Timeout > 0 {
		a = append(a, "--timeout", o.Timeout.String())
	}
	if p.Hold {
		a = append(a, "--hold")
	}
	if p.AckedFile != "" {
		a = append(a, "--acked-file", p.AckedFile)
	}
	return a, nil
}

// RunningLoad is a started LoadProcess: sending, or generated and held.
type RunningLoad struct {
	// Nice is the lowest nice value of the process's threads when it began
	// to send (-1 where it cannot be read): what the priority really is.
	Nice int
	// Batches is the number of requests the process's corpus makes (one
	// pass), from its ready or start line.
	Batches int
	cmd     *exec.Cmd
	stdin   io.WriteCloser // Hold: closed by Release
	stdout  bytes.Buffer
	stderr  strings.Builder // written by the reader goroutine until done
	done    chan error
	// sending is closed at the start line; ended, after done holds the
	// process's outcome, once stderr is read to its end.
	sending, ended chan struct{}
}

// StartLoadProcess starts p and returns once the process has generated its
// corpus and begun to send (its start line), so that what the caller times
// next runs against the load; with p.Hold, once the corpus is generated
// (its ready line), and Release starts the sending. The process ends with
// ctx, or at the end of its duration.
func StartLoadProcess(ctx context.Context, p LoadProcess) (*RunningLoad, error) {
	args, err := p.args()
	if err != nil {
		return nil, err
	}
	r := &RunningLoad{done: make(chan error, 1), sending: make(chan struct{}), ended: make(chan struct{})}
	r.cmd = exec.CommandContext(ctx, p.Binary, args...)
	bindToParent(r.cmd)
	r.cmd.Stdout = &r.stdout
	if p.Hold {
		if r.stdin, err = r.cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	pipe, err := r.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s load: %w", p.Binary, err)
	}
	ready := make(chan struct{}) // the ready line, or the start line
	go func() {                  // reads stderr to its end, then reaps the process
		sc := bufio.NewScanner(pipe)
		isReady, isSending := false, false
		for sc.Scan() {
			line := sc.Text()
			r.stderr.WriteString(line + "\n")
			starts := strings.HasPrefix(line, LoadStartLine)
			if !isReady && (starts || strings.HasPrefix(line, LoadReadyLine)) {
				isReady = true
				r.Batches = requestsOf(line)
				close(ready)
			}
			if !isSending && starts {
				isSending = true
				close(r.sending)
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		r.done <- r.cmd.Wait()
		close(r.ended)
	}()
	select {
	case <-ready:
	case <-r.ended:
		select {
		case <-ready: // it became ready, then ended: a load that ran
		default:
			err := <-r.done
			r.done <- err
			return nil, fmt.Errorf("load process ended before sending: %v: %s", err, lastLines(r.stderr.String(), 10))
		}
	case <-ctx.Done():
		return nil, ctx.Err() // the process is killed with ctx
	}
	if !p.Hold {
		r.readNice()
	}
	return r, nil
}

// Release starts a held load (LoadProcess.Hold): it closes the process's
// standard input and returns once the process has begun to send.
func (r *RunningLoad) Release() error {
	if r.stdin == nil {
		return errors.New("load process: release of a load that was not held")
	}
	// An error here means the process has ended, and why is below.
	_ = r.stdin.Close()
	select {
	case <-r.sending:
	case <-r.ended:
		select {
		case <-r.sending:
		default:
			err := <-r.done
			r.done <- err
			return fmt.Errorf("load process ended before sending: %v: %s", err, lastLines(r.stderr.String(), 10))
		}
	}
	r.readNice()
	return nil
}

func (r *RunningLoad) readNice() {
	n, err := readThreadsNice(r.cmd.Process.Pid)
	if err != nil {
		n = -1
	}
	r.Nice = n
}

// requestsOf reads N from a ready or start line's "... in N requests";
// 0 when absent.
func requestsOf(line string) int {
	_, rest, ok := strings.Cut(line, " spans in ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// WriteAckedFile writes send numbers to path, one a line in ascending
// order: the format of `rastro load --acked-file`.
func WriteAckedFile(path string, sends []int) error {
	slices.Sort(sends)
	var b bytes.Buffer
	for _, n := range sends {
		b.WriteString(strconv.Itoa(n))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write acknowledged requests: %w", err)
	}
	return nil
}

// ReadAckedFile reads a file written by WriteAckedFile.
func ReadAckedFile(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read acknowledged requests: %w", err)
	}
	var out []int
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		n, err := strconv.Atoi(line)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s line %d: %q is not a send number", path, i+1, line)
		}
		out = append(out, n)
	}
	return out, nil
}

// Wait waits for the load to end and returns what it measured; a held load
// ends only once released, or with the context it was started with.
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
