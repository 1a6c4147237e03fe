package chstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rastro-dev/rastro/internal/store"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Insert quorum (docs/clickhouse.md, Cluster mode): the ClickHouse URL's
// insert_quorum=N, a session setting clickhouse-go passes on with every
// query (ParseDSN keeps unknown query parameters as settings, and sends a
// number as the old protocol's varint to 18.16). A replicated table then
// acknowledges an insert only once N replicas of its shard hold the part,
// and refuses it while fewer than N replicas are alive (code 285).
//
// ClickHouse 18.16 lets one quorum insert at a time be under way per
// replicated table and shard: another one meanwhile fails with code 286
// (UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE). So with a quorum a Store inserts
// one batch at a time, and an insert refused with 286 (another process's
// insert under way) is retried with the same blocks until the insert's
// deadline: the replicated tables drop a block they already hold (insert
// deduplication by the block's checksum), so the parts a shard acknowledged
// before the refusal are not written twice, nor counted twice by the views.

// Codes of ClickHouse exceptions about a quorum.
const (
	codeTooFewLiveReplicas         = 285
	codeUnsatisfiedQuorumPrevWrite = 286
)

// quorumOf is the insert_quorum setting of a ClickHouse URL (0 without).
func quorumOf(url string) (int, error) {
	o, err := clickhouse.ParseDSN(url)
	if err != nil {
		return 0, fmt.Errorf("ClickHouse URL: %w", err)
	}
	switch q := o.Settings["insert_quorum"].(type) {
	case nil:
		return 0, nil
	case int:
		if q < 0 {
			return 0, fmt.Errorf("ClickHouse URL: insert_quorum=%d: give a number of replicas", q)
		}
		return q, nil
	default:
		return 0, fmt.Errorf("ClickHouse URL: insert_quorum=%v: give a number of replicas", q)
	}
}

// checkQuorum refuses a quorum the cluster cannot reach: a shard with
// fewer replicas than it would refuse every insert. A quorum of 0 or 1 is
// none.
func checkQuorum(ctx context.Context, conn driver.Conn, cluster string, quorum int) error {
	if quorum < 2 {
		return nil
	}
	if cluster == "" {
		return fmt.Errorf("ClickHouse URL: insert_quorum=%d is for a cluster of replicated tables (--clickhouse-cluster); a single node's tables are not replicated", quorum)
	}
	var fewest uint64
	err := conn.QueryRow(ctx, "SELECT toUInt64(min(n)) FROM (SELECT shard_num, count() AS n FROM system.clusters WHERE cluster = ? GROUP BY shard_num)", cluster).Scan(&fewest)
	if err != nil {
		return fmt.Errorf("read the replicas of cluster %s: %w", cluster, err)
	}
	if fewest < uint64(quorum) {
		return fmt.Errorf("ClickHouse URL: insert_quorum=%d, but a shard of cluster %s has %d replicas: every insert would be refused", quorum, cluster, fewest)
	}
	return nil
}

// exceptionCode is the code of the ClickHouse exception err holds, or 0.
func exceptionCode(err error) int32 {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return ex.Code
	}
	return 0
}

// maxQuorumWait bounds how long an insert waits for an earlier quorum
// insert to reach its quorum when its context has no earlier deadline.
const maxQuorumWait = time.Minute

// withQuorum runs send, which makes one insert and sends the same blocks
// each time it runs, as every insert under a quorum must run (see above):
// a refusal because an earlier quorum insert is under way (286) is sent
// again until ctx's deadline (at most maxQuorumWait), and a refusal for
// want of live replicas (285) says what it means. quorum is the
// insert_quorum the insert runs with; below 2, send runs once. Every insert
// of this package goes through it: spans, logs, erasures, migration
// records, import progress.
func withQuorum(ctx context.Context, quorum int, send func() error) error {
	deadline := time.Now().Add(maxQuorumWait)
	wait := 10 * time.Millisecond
	for {
		err := send()
		if err == nil || quorum < 2 {
			return err
		}
		switch code := exceptionCode(err); {
		case code == codeTooFewLiveReplicas || strings.Contains(err.Error(), "is less than requested quorum"):
			return fmt.Errorf("%w (insert_quorum=%d: fewer replicas of a shard are alive than the quorum, so ClickHouse refused the insert): %w", err, quorum, store.ErrUnavailable)
		case code == codeUnsatisfiedQuorumPrevWrite || strings.Contains(err.Error(), "Quorum for previous write has not been satisfied") ||
			strings.Contains(err.Error(), "Another quorum insert has been already started"):
			t := time.NewTimer(min(wait, time.Until(deadline)))
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w (insert_quorum=%d: an earlier quorum insert had not reached its quorum until the insert's deadline: is a replica down?): %w", err, quorum, store.ErrUnavailable)
			case <-t.C:
			}
			if !time.Now().Before(deadline) {
				return fmt.Errorf("%w (insert_quorum=%d: an earlier quorum insert had not reached its quorum after %v: is a replica down?): %w", err, quorum, maxQuorumWait, store.ErrUnavailable)
			}
			wait = min(2*wait, time.Second)
		default:
			return err
		}
	}
}

// insertQuorum is insert under the Store's quorum (withQuorum): the spans'
// ingested time is fixed before the first attempt, so that a retry sends the
// same blocks.
func (s *Store) insertQuorum(ctx context.Context, batch []*pending) error {
	now := uint64(time.Now().UnixNano())
	return withQuorum(ctx, s.quorum, func() error { return s.insert(ctx, batch, now) })
}

// insertBlock inserts one block, the rows add appends to b, under quorum
// (withQuorum): add runs again for a retry and must append the same rows.
func insertBlock(ctx context.Context, conn driver.Conn, quorum int, insert string, add func(b driver.Batch) error) error {
	return withQuorum(ctx, quorum, func() error {
		b, err := conn.PrepareBatch(ctx, insert)
		if err != nil {
			return err
		}
		if err := add(b); err != nil {
			b.Abort()
			return err
		}
		return b.Send()
	})
}

// insertRow inserts one row as a one-row block under quorum (insertBlock).
// (An INSERT ... VALUES sent with Exec waits for a data block on 18.16:
// every insert here is a block.)
func insertRow(ctx context.Context, conn driver.Conn, quorum int, insert string, values ...any) error {
	return insertBlock(ctx, conn, quorum, insert, func(b driver.Batch) error { return b.Append(values...) })
}
