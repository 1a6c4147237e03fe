package memstore

import (
	"context"

	"github.com/rastro-dev/rastro/internal/query"
	"github.com/rastro-dev/rastro/internal/store"
)

// maxTails is how many tails the store keeps open at once.
const maxTails = 8

// tailQueue is how many appends a tail holds for its reader; beyond it the
// appends' spans are dropped and counted.
const tailQueue = 64

// Tail opens a live tail of the project's spans that f matches.
func (s *Store) Tail(ctx context.Context, project string, f *query.Filter) (store.TailStream, error) {
	return s.tails.Open(ctx, project, f)
}
