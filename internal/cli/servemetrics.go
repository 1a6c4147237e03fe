package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/rastro-dev/rastro/internal/metricstore"
	"github.com/rastro-dev/rastro/internal/wal"
)

// openMetrics opens the metric store under DATA/metrics with the spans'
// durability and seal size.
func openMetrics(dataDir string, mode wal.Mode, sealBytes int64, log *slog.Logger) (*metricstore.Store, error) {
	return metricstore.Open(metricstore.Options{
		Dir: dataDir + "/metrics", WALMode: mode, SealBytes: sealBytes,
		Logf: func(format string, args ...any) { log.Warn(fmt.Sprintf(format, args...)) },
	})
}

// metricRetention applies the spans' retention settings to the metrics
// every interval until ctx ends: whole blocks older than the retention of
// every project in them are removed (0 keeps a project's metrics forever).
func metricRetention(ctx context.Context, ms *metricstore.Store, every, def time.Duration, perProject map[string]time.Duration, log *slog.Logger) {
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
		n, err := ms.DropBefore(func(project string) int64 {
			d, own := perProject[project]
			if !own {
				d = def
			}
			if d <= 0 {
				return math.MinInt64
			}
			return now.Add(-d).UnixMilli()
		})
		if err != nil {
			log.Warn("metric retention", "err", err)
		} else if n > 0 {
			log.Info("metric retention removed samples", "samples", n)
		}
	}
}
