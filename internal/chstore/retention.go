package chstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Retention on ClickHouse follows the embedded engine's settings
// (Options.Retention, Options.ProjectRetention): a project's spans whose
// start is older than its retention are hidden from every query at once
// (the cutoff moves by whole minutes, as on the engine), then removed by a
// sweep that runs every Options.RetentionEvery:
//
//   - a day partition of spans (and of the rollups) whose every project's
//     spans have expired is dropped whole (ALTER TABLE ... DROP PARTITION,
//     cheap: it unlinks the parts);
//   - a project's expired spans left in partitions shared with projects
//     that keep theirs longer are deleted by a mutation (ALTER TABLE ...
//     DELETE WHERE project = ? AND start < ?), at most once per project and
//     day: the cutoff of a mutation is the retention cutoff rounded down to
//     a UTC day, since each mutation rewrites the parts it touches;
//   - the trace index and rollup rows of the project follow the same way;
//   - log records likewise by their time, decided on the logs table alone
//     (its partitions hold other projects than those of spans).
//
// On replicas with insert_quorum, 18.16 mutates no day partition's last
// quorum part until another quorum insert writes into that day: expired
// rows in it stay stored, hidden, until then or until the day is dropped
// (TestClusterReplicasRetention; docs/clickhouse.md#retention).
//
// TTL is not used: 18.16 has none (a TTL clause is a syntax error there),
// and one TTL per project would be an expression rebuilt with every change
// of the settings. The sweep works on every version.

// DefaultRetentionEvery is how often the retention sweep runs.
const DefaultRetentionEvery = time.Minute

// hasRetention reports whether any project's spans expire.
func (o *Options) hasRetention() bool {
	if o.Retention > 0 {
		return true
	}
	for _, d := range o.ProjectRetention {
		if d > 0 {
			return true
		}
	}
	return false
}

// retentionFor returns a project's retention (0 keeps everything).
func (s *Store) retentionFor(project string) time.Duration {
	if d, ok := s.opts.ProjectRetention[project]; ok {
		return d
	}
	return s.opts.Retention
}

// cutoff returns the start time (unix ns) below which a project's spans
// have expired, or 0, in whole minutes as on the engine.
func (s *Store) cutoff(project string) uint64 {
	d := s.retentionFor(project)
	if d <= 0 {
		return 0
	}
	return uint64(s.opts.Now().Add(-d).Truncate(time.Minute).UnixNano())
}

const dayNanos = uint64(24 * time.Hour)

// RetentionSweep is what one sweep did.
type RetentionSweep struct {
	// PartitionsDropped are the partition ids of spans dropped whole.
	PartitionsDropped []string
	// Deletes are the projects whose expired spans a mutation was started
	// for, with the cutoff (unix ns) it deletes below.
	Deletes map[string]uint64
	// LogPartitionsDropped and LogDeletes are the same for log records.
	LogPartitionsDropped []string
	LogDeletes           map[string]uint64
}

// SweepRetention removes expired spans: partitions whose every span has
// expired are dropped, and a project's other expired spans are deleted by a
// mutation (once per project and day). The sweeper runs it every
// Options.RetentionEvery; it is exported for tests and tools.
func (s *Store) SweepRetention(ctx context.Context) (RetentionSweep, error) {
	var out RetentionSweep
	if err := s.usable(ctx); err != nil {
		return out, err
	}
	if !s.opts.hasRetention() {
		return out, nil
	}
	s.retMu.Lock()
	defer s.retMu.Unlock()
	if err := s.sweepFamily(ctx, spansFamily, s.deleted, &out.PartitionsDropped, &out.Deletes); err != nil {
		return out, err
	}
	if err := s.sweepFamily(ctx, logsFamily, s.deletedLogs, &out.LogPartitionsDropped, &out.LogDeletes); err != nil {
		return out, err
	}
	return out, nil
}

// retentionFamily is a table and the tables partitioned and deleted with
// it: spans (with its index and rollups), and logs.
type retentionFamily struct {
	table, time string   // the table whose rows decide, and its time column
	partitioned []string // dropped by the same partition ids
	deletes     []string // a project's rows older than a cutoff (bound: project, cutoff in unix ns)
}

var (
	spansFamily = retentionFamily{"spans", "start", partitionedTables, retentionDeletes}
	logsFamily  = retentionFamily{"logs", "time", []string{"logs"}, []string{"ALTER TABLE logs DELETE WHERE project = ? AND time < ?"}}
)

// sweepFamily drops fam's whole expired partitions and starts the deletes
// of projects' other expired rows (recorded in deleted); it appends what it
// did to dropped and deletes. The caller holds retMu.
func (s *Store) sweepFamily(ctx context.Context, fam retentionFamily, deleted map[string]uint64, dropped *[]string, deletes *map[string]uint64) error {
	type part struct {
		id       string
		projects map[string][2]uint64 // project -> min, max time
	}
	// fam's names are constants of this file. A Distributed table has no
	// _partition_id: on a cluster the id is computed from the time as the
	// partition key does (toDate: the day, whose id is YYYYMMDD).
	pid := "_partition_id"
	if s.target.cluster != "" {
		pid = "toString(toYYYYMMDD(toDate(toDateTime(intDiv(" + fam.time + ", 1000000000)))))"
	}
	rows, err := s.conn.Query(ctx, "SELECT "+pid+" AS pid, project, min("+fam.time+"), max("+fam.time+") FROM "+fam.table+" GROUP BY pid, project")
	if err != nil {
		return fmt.Errorf("retention: list partitions of %s in ClickHouse: %w", fam.table, err)
	}
	parts := map[string]*part{}
	for rows.Next() {
		var id, project string
		var lo, hi uint64
		if err := rows.Scan(&id, &project, &lo, &hi); err != nil {
			rows.Close()
			return fmt.Errorf("retention: list partitions of %s in ClickHouse: %w", fam.table, err)
		}
		p := parts[id]
		if p == nil {
			p = &part{id: id, projects: map[string][2]uint64{}}
			parts[id] = p
		}
		p.projects[project] = [2]uint64{lo, hi}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("retention: list partitions of %s in ClickHouse: %w", fam.table, err)
	}
	ids := make([]string, 0, len(parts))
	for id := range parts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// Projects with expired spans left in partitions kept.
	left := map[string]bool{}
	for _, id := range ids {
		p := parts[id]
		all := true
		for project, r := range p.projects {
			if c := s.cutoff(project); c == 0 || r[1] >= c {
				all = false
			}
		}
		if !all {
			for project, r := range p.projects {
				if c := s.cutoff(project); c != 0 && r[0] < c/dayNanos*dayNanos {
					left[project] = true
				}
			}
			continue
		}
		if !validPartitionID(id) {
			return fmt.Errorf("retention: unexpected partition id %q in %s", id, fam.table)
		}
		// The partition id is the server's own (digits only, checked), not
		// user input; DROP PARTITION takes no bound parameter.
		for _, table := range fam.partitioned {
			if err := s.conn.Exec(ctx, s.target.onLocals("ALTER TABLE "+table+" DROP PARTITION ID '"+id+"'")); err != nil {
				return fmt.Errorf("retention: drop partition %s of %s: %w", id, table, err)
			}
		}
		*dropped = append(*dropped, id)
		s.opts.Logger.Info("clickhouse retention dropped a partition", "table", fam.table, "partition", id)
	}
	projects := make([]string, 0, len(left))
	for p := range left {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	for _, project := range projects {
		c := s.cutoff(project) / dayNanos * dayNanos
		if deleted[project] >= c {
			continue // started already; a mutation runs in the background
		}
		for _, stmt := range fam.deletes {
			if err := s.conn.Exec(ctx, s.target.onLocals(stmt), project, c); err != nil {
				return fmt.Errorf("retention: delete expired rows of %q: %w", project, err)
			}
		}
		if *deletes == nil {
			*deletes = map[string]uint64{}
		}
		(*deletes)[project] = c
		deleted[project] = c
		s.opts.Logger.Info("clickhouse retention started a delete", "table", fam.table, "project", project, "before", time.Unix(0, int64(c)).UTC())
	}
	return nil
}

// partitionedTables are the tables partitioned by the day of start, with
// the same partition ids.
var partitionedTables = []string{"spans", "attr_index", "ops_rollup", "spans_by_trace",
	llmGen1.minutes, llmGen1.hours, llmGen2.minutes, llmGen2.hours}

// retentionDeletes remove a project's rows older than a cutoff (bound:
// project, cutoff in unix ns).
var retentionDeletes = append([]string{
	"ALTER TABLE spans DELETE WHERE project = ? AND start < ?",
	"ALTER TABLE trace_index DELETE WHERE project = ? AND start_max < ?",
	"ALTER TABLE attr_index DELETE WHERE project = ? AND start < ?",
	"ALTER TABLE ops_rollup DELETE WHERE project = ? AND minute < intDiv(?, 60000000000)",
	"ALTER TABLE spans_by_trace DELETE WHERE project = ? AND start < ?",
}, llmRetentionDeletes()...)

// llmRetentionDeletes are the deletes of both generations of LLM rollups.
// The hour holding the cutoff stays: queries read only hours wholly after
// it (the window starts at the cutoff).
func llmRetentionDeletes() []string {
	var out []string
	for _, g := range []llmRollup{llmGen1, llmGen2} {
		out = append(out, "ALTER TABLE "+g.minutes+" DELETE WHERE project = ? AND minute < intDiv(?, 60000000000)",
			"ALTER TABLE "+g.hours+" DELETE WHERE project = ? AND hour < intDiv(?, 3600000000000)")
	}
	return out
}

// validPartitionID accepts the ids of a toDate partition key (YYYYMMDD).
func validPartitionID(id string) bool {
	if id == "" || len(id) > 16 {
		return false
	}
	for _, r := range id {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// sweeper runs SweepRetention every RetentionEvery until Close.
func (s *Store) sweeper() {
	defer s.bg.Done()
	t := time.NewTicker(s.opts.RetentionEvery)
	defer t.Stop()
	for {
		select {
		case <-s.bgCtx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.bgCtx, 5*time.Minute)
		if _, err := s.SweepRetention(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.opts.Logger.Error("clickhouse retention sweep failed; retrying later", "err", err)
		}
		cancel()
	}
}
