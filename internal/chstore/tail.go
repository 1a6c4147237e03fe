package chstore

import (
	"context"

	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// A live tail sees the spans this process acknowledged (its own ingest
// path), not those other rastro processes wrote to the same database.

// maxTails is how many tails the store keeps open at once.
const maxTails = 64

// tailQueue is how many batches a tail holds for its reader; beyond it a
// batch's spans are dropped and counted.
const tailQueue = 64

// Tail opens a live tail of the project's spans that f matches.
func (s *Store) Tail(ctx context.Context, project string, f *query.Filter) (store.TailStream, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	return s.tails.Open(ctx, project, f)
}
