package chstore

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// spans_by_trace holds the columns a whole span is read from (readColumns:
// the body and the LLM fields) sorted by trace id instead of by time, in
// small granules. It is what trace lookups and the bodies of a search page
// read: a trace's spans are a few adjacent rows of it, while in spans they
// share each minute's granules (8,192 rows, whose bodies a lookup
// decompressed whole) with every other trace of that minute. Measured on
// 1M spans: the spans read of a trace lookup touched 56,000 rows and 11.5 MB
// (docs/benchmarks/clickhouse.md).
//
// A materialized view writes it from every block inserted into spans, so an
// insert fills both or fails; partitioned like spans, so retention drops the
// same partition ids; ReplacingMergeTree(ingested) like spans, and reads
// keep the newest copy of a re-sent span as they do there. The price is the
// bodies stored twice (about 80 bytes per span of the canonical corpus).
const byTraceGranule = 256

var byTraceTable = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS spans_by_trace (
	project String,
	trace_id FixedString(16),
	span_id FixedString(8),
	start UInt64,
	ingested UInt64,
	body String,
	llm UInt8,
	llm_provider String,
	llm_request_model String,
	llm_response_model String,
	llm_operation String,
	llm_session String,
	llm_user String,
	llm_agent String,
	llm_tool String,
	llm_input_tokens Int64,
	llm_output_tokens Int64,
	llm_cache_read_tokens Int64,
	llm_cache_creation_tokens Int64,
	llm_reasoning_tokens Int64,
	llm_cost_nano_usd Int64,
	llm_cost_source UInt8,
	llm_ttft UInt64,
	llm_counted UInt8
) ENGINE = ReplacingMergeTree(ingested)
PARTITION BY toDate(toDateTime(intDiv(start, 1000000000)))
ORDER BY (project, trace_id, span_id)
SETTINGS index_granularity = %d`, byTraceGranule)

// byTraceColumns are the columns of spans_by_trace, as in spans.
const byTraceColumns = `project, ` + readColumns

const byTraceView = `CREATE MATERIALIZED VIEW IF NOT EXISTS spans_by_trace_mv TO spans_by_trace AS
	SELECT ` + byTraceColumns + ` FROM spans`

// backfillByTrace copies the spans stored before the view existed, then
// records spans_by_trace as complete. A span inserted while it runs may be
// copied twice (by the view and by the backfill), as may every span when
// two processes migrate at once: the copies are identical, and reads keep
// one (the newest by ingested, as for a re-sent span).
func backfillByTrace(ctx context.Context, conn driver.Conn, _ schemaTarget, quorum int) error {
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM spans").Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		copyAll := func() error {
			return conn.Exec(ctx, "INSERT INTO spans_by_trace ("+byTraceColumns+") SELECT "+byTraceColumns+" FROM spans")
		}
		if err := withQuorum(ctx, quorum, copyAll); err != nil {
			return fmt.Errorf("copy %d spans into spans_by_trace: %w", n, err)
		}
	}
	return insertRow(ctx, conn, quorum, "INSERT INTO rollups (name, complete, at)", "by_trace", uint8(1), nowSecond())
}

// bodyTable is the table whole spans are read from by key: spans_by_trace
// once it holds every span, else spans.
func (s *Store) bodyTable() string {
	if s.rollups["by_trace"] && !s.opts.NoByTrace {
		return "spans_by_trace"
	}
	return "spans"
}
