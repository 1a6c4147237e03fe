package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rastro-dev/rastro/internal/engine"

	"github.com/rastro-dev/rastro/internal/logstore"
	"github.com/rastro-dev/rastro/internal/wal"
)

// openLogs opens the log store under DATA/logs with the spans' durability,
// seal size, compaction settings (--compaction and its policy) and
// retention (which merges apply to the records they rewrite).
func openLogs(c *serveConfig, mode wal.Mode, log *slog.Logger) (*logstore.Store, error) {
	return logstore.Open(logstore.Options{
		Dir: c.dataDir + "/logs", WALMode: mode, SealBytes: int64(c.sealBytes),
		// The engine's soft memory limit leaves room for the log buffers.
		Reserve:    engine.ReserveMemory,
		Logf:       func(format string, args ...any) { log.Warn(fmt.Sprintf(format, args...)) },
		Compaction: c.compaction, CompactionMaxSegmentBytes: int64(c.compactionMax), CompactionFanout: c.compactionFanout,
		Retention: func(project string) time.Duration {
			if d, ok := c.retentionProject.m[project]; ok {
				return d
			}
			return time.Duration(c.retention)
		},
	})
}

// logRetention applies the spans' retention settings to the logs every
// interval until ctx ends: whole segments older than their project's
// retention are removed (0 keeps a project's logs forever).
func logRetention(ctx context.Context, ls *logstore.Store, every, def time.Duration, perProject map[string]time.Duration, log *slog.Logger) {
	if def == 0 && len(perProject) == 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		drop := func(d time.Duration, match func(string) bool) {
			if d <= 0 {
				return
			}
			n, err := ls.DropBefore(uint64(now.Add(-d).UnixNano()), match)
			if err != nil {
				log.Warn("log retention", "err", err)
			} else if n > 0 {
				log.Info("log retention removed records", "records", n, "older_than", d.String())
			}
		}
		for p, d := range perProject {
			drop(d, func(q string) bool { return q == p })
		}
		drop(def, func(q string) bool { _, own := perProject[q]; return !own })
	}
}
